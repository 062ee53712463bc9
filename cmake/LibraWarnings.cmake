# libra_set_warnings(target): the project's warning set, and -Werror when LIBRA_WERROR is on.
function(libra_set_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
    -Woverloaded-virtual -Wimplicit-fallthrough)
  # GCC 12 reports -Wrestrict false positives inside std::string at -O3 (GCC bug 105651).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(LIBRA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(LIBRA_SANITIZE)
    string(REPLACE ";" "," _san "${LIBRA_SANITIZE}")
    target_compile_options(${target} PRIVATE -fsanitize=${_san} -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=${_san})
  endif()
endfunction()

# libra_module(name SOURCES... DEPS... PRIVATE_DEPS...): one static library per src/<module>/.
# Layering is what DEPS says: a module can only include headers of the modules it links.
function(libra_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(libra_${name} STATIC ${M_SOURCES})
  target_include_directories(libra_${name} PUBLIC
    "${PROJECT_SOURCE_DIR}/src" "${PROJECT_BINARY_DIR}/generated")
  target_link_libraries(libra_${name} PUBLIC ${M_DEPS} PRIVATE ${M_PRIVATE_DEPS})
  libra_set_warnings(libra_${name})
endfunction()
