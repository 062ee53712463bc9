// LIBRA_CHECK: aborts with file:line and a message when an invariant is broken. Never used for
// user input (that is a Status); only for conditions that mean libra itself has a bug.
#pragma once

#include <sstream>

namespace libra::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  /// Prints the message and aborts.
  ~CheckFailure();

  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

}  // namespace libra::internal

#define LIBRA_CHECK(condition) \
  if (condition) {             \
  } else                       \
    ::libra::internal::CheckFailure(__FILE__, __LINE__, #condition)
