// The JSON reader (and writer): any text -> ParseJson; a document that parses is written and
// must read back as the same value.
#include "common/json.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace libra;
  auto value = ParseJson(fuzz::AsText(data, size));
  if (!value.ok()) return 0;
  auto again = ParseJson(ToJson(*value));
  fuzz::Expect(again.ok() && *again == *value, "written JSON reads back as the same value");
  return 0;
}
