#include "common/status.h"

namespace libra {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidRecipe:
      return "invalid recipe";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kUnschedulable:
      return "unschedulable";
    case StatusCode::kBackend:
      return "backend error";
    case StatusCode::kTimeout:
      return "timeout";
    case StatusCode::kStore:
      return "store error";
    case StatusCode::kInterrupted:
      return "interrupted";
    case StatusCode::kInternal:
      return "internal error";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

}  // namespace libra
