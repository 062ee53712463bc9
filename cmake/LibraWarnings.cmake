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
# Layering is what DEPS says, and the compiler holds to it: a module's include directory,
# build/layers/<folder>/, holds only a link to its own folder, and include directories travel
# along PUBLIC links, so a module sees the headers of itself and of the modules it links (directly
# or through them) and of no other. scripts/check-includes.py checks DEPS against
# docs/architecture.md.
function(libra_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(libra_${name} STATIC ${M_SOURCES})
  get_filename_component(folder "${CMAKE_CURRENT_SOURCE_DIR}" NAME)
  set(layer "${PROJECT_BINARY_DIR}/layers/${folder}")
  file(MAKE_DIRECTORY "${layer}")
  file(CREATE_LINK "${CMAKE_CURRENT_SOURCE_DIR}" "${layer}/${folder}" SYMBOLIC)
  target_include_directories(libra_${name} PUBLIC "${layer}" "${PROJECT_BINARY_DIR}/generated")
  target_link_libraries(libra_${name} PUBLIC ${M_DEPS} PRIVATE ${M_PRIVATE_DEPS})
  libra_set_warnings(libra_${name})
endfunction()
