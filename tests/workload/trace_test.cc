#include "workload/trace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/strings.h"
#include "support/test_util.h"

namespace libra::workload {
namespace {

using test::ReadFile;
using test::ScopedTempDir;
using test::WriteFile;

TurnScript ToolTurn(int64_t tokens, const std::string& tool,
                    ToolStatus status = ToolStatus::kSuccess, int64_t output_tokens = 0,
                    double latency_s = 0) {
  TurnScript turn;
  turn.generated_tokens = tokens;
  turn.end = TurnEnd::kToolCall;
  turn.tool = tool;
  turn.tool_status = status;
  turn.tool_output_tokens = output_tokens;
  turn.tool_latency_s = latency_s;
  return turn;
}

TurnScript EndTurn(int64_t tokens, TurnEnd end = TurnEnd::kStop) {
  TurnScript turn;
  turn.generated_tokens = tokens;
  turn.end = end;
  return turn;
}

TraceRecord Record(int64_t prompt, int sample, int64_t prompt_tokens, double reward,
                   std::optional<int> version, std::vector<TurnScript> turns) {
  TraceRecord record;
  record.prompt = prompt;
  record.sample = sample;
  record.prompt_tokens = prompt_tokens;
  record.reward = reward;
  record.version = version;
  record.turns = std::move(turns);
  return record;
}

/// A one-turn record whose reward identifies it: prompt * 100 + sample.
TraceRecord Tagged(int64_t prompt, int sample, int64_t prompt_tokens = 100) {
  return Record(prompt, sample, prompt_tokens, static_cast<double>(prompt * 100 + sample),
                std::nullopt, {EndTurn(10)});
}

/// A valid line for (prompt, sample).
std::string ValidLine(int64_t prompt, int sample) { return TraceLine(Tagged(prompt, sample)); }

/// The files in `folder`, by name.
std::vector<std::string> FilesIn(const std::filesystem::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(TraceTest, TraceLineWritesTheDocumentedFormat) {
  // A record becomes one compact JSON object: keys in the documented order, tool fields only on
  // tool_call turns, version only when set.
  const TraceRecord record =
      Record(12, 0, 812, 1.0, 3,
             {ToolTurn(410, "validator", ToolStatus::kSuccess, 120, 0.02), EndTurn(95)});
  EXPECT_EQ(
      TraceLine(record),
      R"({"prompt":12,"sample":0,"prompt_tokens":812,"reward":1.0,"version":3,"turns":[)"
      R"({"generated_tokens":410,"end":"tool_call","tool":"validator","tool_status":"success",)"
      R"("tool_output_tokens":120,"tool_latency_s":0.02},{"generated_tokens":95,"end":"stop"}]})");

  TraceRecord stray = Record(1, 2, 3, 0.0, std::nullopt, {EndTurn(4, TurnEnd::kTruncated)});
  stray.turns[0].tool = "ignored";
  stray.turns[0].tool_latency_s = 9;
  EXPECT_EQ(TraceLine(stray), R"({"prompt":1,"sample":2,"prompt_tokens":3,"reward":0.0,)"
                              R"("turns":[{"generated_tokens":4,"end":"truncated"}]})");
}

TEST(TraceTest, ParseTraceLineRoundTripsRecords) {
  // ParseTraceLine(TraceLine(r)) == r for valid records of every shape.
  struct Case {
    std::string name;
    TraceRecord record;
  };
  const std::vector<Case> cases = {
      {"one stop turn", Record(0, 0, 1, 0.0, std::nullopt, {EndTurn(1)})},
      {"truncated", Record(5, 7, 64, 0.0, 0, {EndTurn(4096, TurnEnd::kTruncated)})},
      {"tool calls of every status",
       Record(123456789012, 2147483647, 32000, -0.75, 2147483647,
              {ToolTurn(410, "validator", ToolStatus::kSuccess, 120, 0.02),
               ToolTurn(0, "search", ToolStatus::kFailure, 0, 1.0 / 3.0),
               ToolTurn(7, "python \xC3\xA9 \"quoted\"", ToolStatus::kTimeout, 3, 30.0),
               EndTurn(95)})},
      {"fractional reward", Record(3, 1, 812, 0.1 + 0.2, 4, {EndTurn(2)})},
      {"huge reward", Record(3, 1, 812, 1e300, std::nullopt, {EndTurn(2)})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Result<TraceRecord> parsed = ParseTraceLine(TraceLine(c.record));
    ASSERT_OK(parsed);
    EXPECT_EQ(*parsed, c.record);
  }
}

TEST(TraceTest, ParseTraceLineAppliesDefaults) {
  // Tool status, output tokens and latency default to success, 0 and 0; version to unset;
  // whitespace between tokens is allowed.
  const Result<TraceRecord> parsed = ParseTraceLine(
      R"( { "prompt": 12, "sample": 0, "prompt_tokens": 812, "reward": 1, )"
      R"("turns": [ {"generated_tokens": 410, "end": "tool_call", "tool": "validator"}, )"
      R"({"generated_tokens": 95, "end": "stop"} ] } )");
  ASSERT_OK(parsed);
  EXPECT_EQ(*parsed,
            Record(12, 0, 812, 1.0, std::nullopt, {ToolTurn(410, "validator"), EndTurn(95)}));
}

TEST(TraceTest, ParseTraceLineRejectsMalformedLines) {
  // Each malformed line is refused with one message naming the field and the problem.
  const std::string head = R"({"prompt":1,"sample":0,"prompt_tokens":10,"reward":1.0,)";
  const std::string stop = R"({"generated_tokens":5,"end":"stop"})";
  const std::string call = R"({"generated_tokens":5,"end":"tool_call","tool":"t")";
  auto with_turns = [&](const std::string& turns) { return head + R"("turns":[)" + turns + "]}"; };
  struct Case {
    std::string name;
    std::string line;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"not JSON", R"({"prompt": 1,)",
       "not JSON: line 1, column 14: expected a string key (got end of input)"},
      {"trailing comma", head + R"("turns":[)" + stop + ",]}",
       "not JSON: line 1, column 101: trailing comma before ']'"},
      {"not an object", "[1]", "expected a JSON object (got an array)"},
      {"unknown key with hint", R"({"promt":1})", "unknown key 'promt'; did you mean 'prompt'?"},
      {"unknown key", with_turns(stop).insert(1, R"("extra":true,)"), "unknown key 'extra'"},
      {"missing prompt", R"({"sample":0})", "missing key 'prompt'"},
      {"prompt as string", R"({"prompt":"12"})", "prompt: expected an integer (got \"12\")"},
      {"prompt as double", R"({"prompt":12.0})", "prompt: expected an integer (got 12.0)"},
      {"negative prompt", R"({"prompt":-1})", "prompt: must be at least 0 (got -1)"},
      {"missing sample", R"({"prompt":1})", "missing key 'sample'"},
      {"sample too large", R"({"prompt":1,"sample":2147483648})",
       "sample: must be at most 2147483647 (got 2147483648)"},
      {"zero prompt tokens", R"({"prompt":1,"sample":0,"prompt_tokens":0})",
       "prompt_tokens: must be at least 1 (got 0)"},
      {"missing reward", R"({"prompt":1,"sample":0,"prompt_tokens":10})", "missing key 'reward'"},
      {"reward as string", R"({"prompt":1,"sample":0,"prompt_tokens":10,"reward":"high"})",
       "reward: expected a number (got \"high\")"},
      {"reward null", R"({"prompt":1,"sample":0,"prompt_tokens":10,"reward":null})",
       "reward: expected a number (got null)"},
      {"long value is cut",
       R"({"prompt":1,"sample":0,"prompt_tokens":10,"reward":")" + std::string(60, 'a') + "\"}",
       "reward: expected a number (got \"" + std::string(39, 'a') + "...)"},
      {"negative version", head + R"("version":-1})", "version: must be at least 0 (got -1)"},
      {"version as bool", head + R"("version":true})", "version: expected an integer (got true)"},
      {"missing turns", R"({"prompt":1,"sample":0,"prompt_tokens":10,"reward":1.0})",
       "missing key 'turns'"},
      {"turns not an array", head + R"("turns":{}})", "turns: expected an array (got an object)"},
      {"no turns", with_turns(""), "turns: must not be empty"},
      {"turn not an object", with_turns("3"), "turns[0]: expected an object (got 3)"},
      {"unknown turn key", with_turns(R"({"generated_tokens":5,"ends":"stop"})"),
       "turns[0]: unknown key 'ends'; did you mean 'end'?"},
      {"missing generated tokens", with_turns(R"({"end":"stop"})"),
       "turns[0]: missing key 'generated_tokens'"},
      {"negative generated tokens", with_turns(R"({"generated_tokens":-1,"end":"stop"})"),
       "turns[0].generated_tokens: must be at least 0 (got -1)"},
      {"missing end", with_turns(R"({"generated_tokens":5})"), "turns[0]: missing key 'end'"},
      {"unknown end", with_turns(call + "}," + call + R"(},{"generated_tokens":5,"end":"done"})"),
       "turns[2].end: expected one of tool_call, stop, truncated (got \"done\")"},
      {"end not a string", with_turns(R"({"generated_tokens":5,"end":1})"),
       "turns[0].end: expected one of tool_call, stop, truncated (got 1)"},
      {"stop before the last turn", with_turns(stop + "," + stop),
       "turns[0].end: every turn but the last must end in tool_call (got \"stop\")"},
      {"last turn calls a tool", with_turns(call + "}," + call + "}"),
       "turns[1].end: the last turn must end in stop or truncated (got \"tool_call\")"},
      {"tool call without tool", with_turns(R"({"generated_tokens":5,"end":"tool_call"},)" + stop),
       "turns[0]: missing key 'tool' (required when end is tool_call)"},
      {"empty tool", with_turns(R"({"generated_tokens":5,"end":"tool_call","tool":""},)" + stop),
       "turns[0].tool: must not be empty"},
      {"tool not a string",
       with_turns(R"({"generated_tokens":5,"end":"tool_call","tool":7},)" + stop),
       "turns[0].tool: expected a string (got 7)"},
      {"tool on a stop turn", with_turns(R"({"generated_tokens":5,"end":"stop","tool":"t"})"),
       "turns[0].tool: only allowed when end is tool_call"},
      {"latency on a truncated turn",
       with_turns(R"({"generated_tokens":5,"end":"truncated","tool_latency_s":1})"),
       "turns[0].tool_latency_s: only allowed when end is tool_call"},
      {"unknown tool status", with_turns(call + R"(,"tool_status":"ok"},)" + stop),
       "turns[0].tool_status: expected one of success, failure, timeout (got \"ok\")"},
      {"negative tool output", with_turns(call + R"(,"tool_output_tokens":-5},)" + stop),
       "turns[0].tool_output_tokens: must be at least 0 (got -5)"},
      {"negative latency", with_turns(call + R"(,"tool_latency_s":-0.5},)" + stop),
       "turns[0].tool_latency_s: must be at least 0 (got -0.5)"},
      {"latency as string", with_turns(call + R"(,"tool_latency_s":"fast"},)" + stop),
       "turns[0].tool_latency_s: expected a number (got \"fast\")"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name + ": " + c.line);
    const Result<TraceRecord> parsed = ParseTraceLine(c.line);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), c.message);
  }
}

TEST(TraceTest, ReadTraceSkipsCommentsAndBlankLines) {
  // Blank lines, lines whose first non-blank character is '#', CR line ends and a missing final
  // newline are all fine; records come back in file order.
  const ScopedTempDir dir;
  const std::string path = dir.File("run.jsonl");
  WriteFile(path, "# recorded by libra\n\n   \n" + ValidLine(2, 1) + "\r\n\t# another comment\n" +
                      ValidLine(1, 0));
  const Result<std::vector<TraceRecord>> records = ReadTrace(path);
  ASSERT_OK(records);
  EXPECT_EQ(*records, (std::vector<TraceRecord>{Tagged(2, 1), Tagged(1, 0)}));
}

TEST(TraceTest, ReadTraceReportsEveryMalformedLineWithItsNumber) {
  // All bad lines are listed, in file order, each as path:line: problem; a repeated
  // (prompt, sample) is reported at its second occurrence with the first's line.
  const ScopedTempDir dir;
  const std::string path = dir.File("x.jsonl");
  const std::string bad_end = R"({"prompt":4,"sample":0,"prompt_tokens":10,"reward":1.0,"turns":[)"
                              R"({"generated_tokens":5,"end":"tool_call","tool":"t"},)"
                              R"({"generated_tokens":5,"end":"tool_call","tool":"t"},)"
                              R"({"generated_tokens":5,"end":"done"}]})";
  WriteFile(path, "# trace\n" + ValidLine(1, 0) + "\n" + R"({"prompt": 1,)" + "\n" +
                      ValidLine(1, 1) + "\n\n" + bad_end + "\n" + ValidLine(1, 0) + "\n");
  const Result<std::vector<TraceRecord>> records = ReadTrace(path);
  ASSERT_FALSE(records.ok());
  EXPECT_EQ(records.status().code(), StatusCode::kInvalidRecipe);
  EXPECT_EQ(records.status().message(),
            path + ":3: not JSON: line 1, column 14: expected a string key (got end of input)\n" +
                path +
                ":6: turns[2].end: expected one of tool_call, stop, truncated (got \"done\")\n" +
                path + ":7: duplicate trajectory (prompt 1, sample 0); first at line 2");
}

TEST(TraceTest, ReadTraceCapsTheListOfMalformedLines) {
  // With more than 20 bad lines, the first 20 are listed and the rest counted.
  const ScopedTempDir dir;
  const std::string path = dir.File("bad.jsonl");
  std::string text;
  for (int i = 0; i < 25; ++i) text += "oops\n";
  WriteFile(path, text);
  const Result<std::vector<TraceRecord>> records = ReadTrace(path);
  ASSERT_FALSE(records.ok());
  const std::vector<std::string> lines = StrSplit(records.status().message(), '\n');
  ASSERT_EQ(lines.size(), 21u);
  EXPECT_EQ(lines[0], path + ":1: not JSON: line 1, column 1: expected a value (got 'oops')");
  EXPECT_EQ(lines[19], path + ":20: not JSON: line 1, column 1: expected a value (got 'oops')");
  EXPECT_EQ(lines[20], path + ": 5 more malformed lines not shown");
}

TEST(TraceTest, ReadTraceRejectsUnreadableAndEmptyFiles) {
  // A missing or unreadable file is kNotFound naming it; a file without records is refused.
  const ScopedTempDir dir;
  struct Case {
    std::string name;
    std::string path;
    std::string text;  // written unless empty
    StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"missing", dir.File("none.jsonl"), "", StatusCode::kNotFound,
       dir.File("none.jsonl") + ": cannot read the trace file (No such file or directory)"},
      {"a folder", dir.path().string(), "", StatusCode::kNotFound,
       dir.path().string() + ": cannot read the trace file (Is a directory)"},
      {"only comments", dir.File("comments.jsonl"), "# nothing\n\n", StatusCode::kInvalidRecipe,
       dir.File("comments.jsonl") + ": no trajectories (every line is blank or a comment)"},
  };
  WriteFile(dir.File("empty.jsonl"), "");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    if (!c.text.empty()) WriteFile(c.path, c.text);
    const Result<std::vector<TraceRecord>> records = ReadTrace(c.path);
    ASSERT_FALSE(records.ok());
    EXPECT_EQ(records.status().code(), c.code);
    EXPECT_EQ(records.status().message(), c.message);
  }
  const Result<std::vector<TraceRecord>> empty = ReadTrace(dir.File("empty.jsonl"));
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidRecipe);
}

TEST(TraceTest, WriteTraceThenReadTraceRoundTrips) {
  // Records written by WriteTrace read back identical and in order, one line each; an existing
  // file is replaced and no temporary file is left behind.
  const ScopedTempDir dir;
  const std::string path = dir.File("run.jsonl");
  WriteFile(path, "old contents\n");
  const std::vector<TraceRecord> records = {
      Record(7, 1, 812, 1.0, 3,
             {ToolTurn(410, "validator", ToolStatus::kSuccess, 120, 0.02),
              ToolTurn(33, "search", ToolStatus::kTimeout, 0, 30.0), EndTurn(95)}),
      Record(7, 0, 812, 0.0, 3, {EndTurn(2048, TurnEnd::kTruncated)}),
      Record(2, 0, 90, 0.5, std::nullopt, {ToolTurn(0, "env", ToolStatus::kFailure), EndTurn(1)}),
  };
  ASSERT_OK(WriteTrace(path, records));
  EXPECT_EQ(ReadFile(path), TraceLine(records[0]) + "\n" + TraceLine(records[1]) + "\n" +
                                TraceLine(records[2]) + "\n");
  const Result<std::vector<TraceRecord>> read = ReadTrace(path);
  ASSERT_OK(read);
  EXPECT_EQ(*read, records);
  EXPECT_EQ(FilesIn(dir.path()), std::vector<std::string>{"run.jsonl"});
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_NE(info.st_mode & S_IRGRP, 0u) << "the trace should not stay private like a temp file";
}

TEST(TraceTest, WriteTraceRefusesRecordsThatWouldNotReadBack) {
  // Records ReadTrace would reject are refused before anything is written: the target keeps its
  // contents and no temporary file appears.
  const ScopedTempDir dir;
  const std::string path = dir.File("run.jsonl");
  WriteFile(path, "old contents\n");
  TraceRecord no_turns = Tagged(2, 0);
  no_turns.turns.clear();
  TraceRecord nan_reward = Tagged(3, 0);
  nan_reward.reward = std::numeric_limits<double>::quiet_NaN();
  TraceRecord middle_stop = Tagged(4, 0);
  middle_stop.turns = {EndTurn(1), EndTurn(2)};
  struct Case {
    std::string name;
    std::vector<TraceRecord> records;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"no records", {}, path + ": no trajectories to write"},
      {"no turns",
       {Tagged(1, 0), no_turns},
       path + ": records[1] (prompt 2, sample 0): turns: must not be empty"},
      {"NaN reward",
       {nan_reward},
       path + ": records[0] (prompt 3, sample 0): reward: expected a number (got null)"},
      {"stop before the last turn",
       {middle_stop},
       path + ": records[0] (prompt 4, sample 0): turns[0].end: every turn but the last must end "
              "in tool_call (got \"stop\")"},
      {"duplicate",
       {Tagged(1, 0), Tagged(1, 0)},
       path + ": records[1] (prompt 1, sample 0): repeats records[0]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Status status = WriteTrace(path, c.records);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), c.message);
    EXPECT_EQ(ReadFile(path), "old contents\n");
    EXPECT_EQ(FilesIn(dir.path()), std::vector<std::string>{"run.jsonl"});
  }
}

TEST(TraceTest, WriteTraceFailureLeavesNothingHalfWritten) {
  // When the file cannot be written the error names the path, whatever is at the path is
  // untouched and the temporary file is removed: a folder in the way of the rename, and a
  // missing folder.
  const ScopedTempDir dir;
  const std::vector<TraceRecord> records = {Tagged(1, 0)};

  const std::string in_the_way = dir.File("taken.jsonl");
  WriteFile(in_the_way + "/keep.txt", "keep");
  Status status = WriteTrace(in_the_way, records);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), in_the_way + ": cannot write the trace file (Is a directory)");
  EXPECT_EQ(ReadFile(in_the_way + "/keep.txt"), "keep");
  EXPECT_EQ(FilesIn(dir.path()), std::vector<std::string>{"taken.jsonl"});

  const std::string nowhere = dir.File("missing/run.jsonl");
  status = WriteTrace(nowhere, records);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            nowhere + ": cannot write the trace file (No such file or directory)");
  EXPECT_EQ(FilesIn(dir.path()), std::vector<std::string>{"taken.jsonl"});
}

TEST(TraceTest, WriteTraceIntoReadOnlyFolderKeepsTheOldFile) {
  // In a folder that cannot be written the old trace stays as it was and nothing is added.
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores folder permissions";
  const ScopedTempDir dir;
  const std::string locked = dir.File("locked");
  const std::string target = locked + "/run.jsonl";
  WriteFile(target, "old contents\n");
  ASSERT_EQ(::chmod(locked.c_str(), 0555), 0);
  const Status status = WriteTrace(target, {Tagged(1, 0)});
  ::chmod(locked.c_str(), 0755);
  EXPECT_EQ(status.message(), target + ": cannot write the trace file (Permission denied)");
  EXPECT_EQ(ReadFile(target), "old contents\n");
  EXPECT_EQ(FilesIn(locked), std::vector<std::string>{"run.jsonl"});
}

TEST(TraceWorkloadTest, MapsPromptIndicesToSortedPromptIdsAndWraps) {
  // Prompt index i is the i-th distinct prompt id in ascending order (mod the count), with the
  // prompt tokens of that prompt's first record in the file and difficulty 0.5.
  const std::vector<TraceRecord> records = {
      Tagged(30, 1, 300), Tagged(10, 2, 100), Tagged(30, 0, 333),
      Tagged(20, 5, 200), Tagged(10, 0, 111),
  };
  const TraceWorkload workload("traces/run.jsonl", records);
  EXPECT_EQ(workload.prompt_count(), 3);
  struct Case {
    int64_t index;
    int64_t prompt_tokens;
  };
  const std::vector<Case> cases = {{0, 100}, {1, 200}, {2, 300}, {3, 100}, {4, 200}, {3002, 300}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.index);
    const PromptInfo info = workload.Prompt(c.index);
    EXPECT_EQ(info.index, c.index);
    EXPECT_EQ(info.prompt_tokens, c.prompt_tokens);
    EXPECT_EQ(info.difficulty, 0.5);
  }
}

TEST(TraceWorkloadTest, MapsSamplesToSortedRecordedSamplesAndWraps) {
  // Sample s of a prompt is its s-th recorded sample in ascending sample order (mod the count);
  // the recorded turns and reward are replayed whatever version and skill ask.
  const std::vector<TraceRecord> records = {
      Tagged(30, 1), Tagged(10, 2), Tagged(30, 0), Tagged(20, 5), Tagged(10, 0),
  };
  const TraceWorkload workload("traces/run.jsonl", records);
  struct Case {
    int64_t prompt_index;
    int sample;
    double reward;  // identifies the record: prompt id * 100 + recorded sample
  };
  const std::vector<Case> cases = {
      {0, 0, 1000}, {0, 1, 1002}, {0, 2, 1000}, {0, 5, 1002}, {1, 0, 2005},
      {1, 7, 2005}, {2, 0, 3000}, {2, 1, 3001}, {5, 3, 3001}, {3, 1, 1002},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(
        StrFormat("prompt %lld sample %d", static_cast<long long>(c.prompt_index), c.sample));
    const TrajectoryScript script = workload.Script(c.prompt_index, c.sample, 0, 0.3);
    EXPECT_EQ(script.reward, c.reward);
    EXPECT_EQ(script.turns, std::vector<TurnScript>{EndTurn(10)});
    EXPECT_EQ(workload.Script(c.prompt_index, c.sample, 17, 0.95), script);
  }
}

TEST(TraceWorkloadTest, ReplaysRecordedTurnsAndDescribesItself) {
  // A replayed script carries the record's turns and reward verbatim; the workload names its file
  // and uses the default skill parameters.
  const TraceRecord record = Record(4, 0, 812, 0.0, 2,
                                    {ToolTurn(410, "validator", ToolStatus::kFailure, 120, 0.02),
                                     EndTurn(95, TurnEnd::kTruncated)});
  const TraceWorkload workload("traces/run.jsonl", {record});
  const TrajectoryScript script = workload.Script(0, 0, 0, 0.5);
  EXPECT_EQ(script.turns, record.turns);
  EXPECT_EQ(script.reward, 0.0);
  EXPECT_TRUE(script.truncated());
  EXPECT_EQ(workload.Describe(), "trace traces/run.jsonl");
  EXPECT_EQ(workload.skill_params(), SkillParams());
}

TEST(TraceWorkloadTest, MakeTraceWorkloadReadsTheFile) {
  // MakeTraceWorkload replays the file at the path, and passes ReadTrace's errors on.
  const ScopedTempDir dir;
  const std::string path = dir.File("run.jsonl");
  ASSERT_OK(WriteTrace(path, {Tagged(5, 0, 64), Tagged(5, 1, 64)}));
  const Result<std::unique_ptr<Workload>> workload = MakeTraceWorkload(path);
  ASSERT_OK(workload);
  EXPECT_EQ((*workload)->Describe(), "trace " + path);
  EXPECT_EQ((*workload)->Prompt(0).prompt_tokens, 64);
  EXPECT_EQ((*workload)->Script(0, 1, 0, 0).reward, 501);

  const Result<std::unique_ptr<Workload>> missing = MakeTraceWorkload(dir.File("none.jsonl"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace libra::workload
