#include "common/check.h"

#include <cstdio>
#include <cstdlib>

namespace libra::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << file << ":" << line << ": check failed: " << condition << ": ";
}

CheckFailure::~CheckFailure() {
  std::fprintf(stderr, "libra: internal error (a bug, please report it)\n%s\n",
               stream_.str().c_str());
  std::abort();
}

}  // namespace libra::internal
