// The trace reader: a JSONL file -> ParseTrace (every line checked), then the replay a run makes
// of it (prompts and samples, wrapping around) and the writer's line for each record, which
// must read back as the same record.
#include "fuzz/fuzz_util.h"
#include "workload/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace libra;
  auto records = workload::ParseTrace(fuzz::AsText(data, size), "fuzz.jsonl");
  if (!records.ok()) return 0;
  for (const workload::TraceRecord& record : *records) {
    auto again = workload::ParseTraceLine(workload::TraceLine(record));
    fuzz::Expect(again.ok() && *again == record, "a record's line reads back as the record");
  }
  const workload::TraceWorkload replay("fuzz.jsonl", *records);
  for (int64_t prompt = 0; prompt < 4; ++prompt) {
    static_cast<void>(replay.Prompt(prompt));
    for (int sample = 0; sample < 3; ++sample) {
      static_cast<void>(replay.Script(prompt, sample, 0, replay.skill_params().initial));
    }
  }
  static_cast<void>(replay.MaxContextTokens());
  return 0;
}
