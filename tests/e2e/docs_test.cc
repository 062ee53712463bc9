// docs/reports.md documents every field name the data formats carry (--format json|csv and
// --json of each command) and every metric of `libra export`, so that scripts can rely on them:
// a field or metric added without its line in the docs fails here.
#include <regex>
#include <set>

#include "common/json.h"
#include "common/strings.h"
#include "report/metrics.h"
#include "support/test_util.h"

namespace libra::test {
namespace {

/// Every `backticked` word of the page's prose and tables (not of its code blocks).
std::set<std::string> Documented() {
  std::set<std::string> names;
  bool code = false;
  static const std::regex kCode("`([^`]+)`");
  for (const std::string& line : StrSplit(ReadFile(SourcePath("docs/reports.md")), '\n')) {
    if (line.rfind("```", 0) == 0) code = !code;
    if (code) continue;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), kCode);
         it != std::sregex_iterator(); ++it) {
      names.insert((*it)[1].str());
    }
  }
  return names;
}

/// The field names of every table of a command's JSON document (and its top-level fields).
std::set<std::string> Fields(const std::vector<std::string>& args, const std::string& cwd) {
  const CommandResult r = RunLibra(args, cwd);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto doc = ParseJson(r.out);
  EXPECT_TRUE(doc.ok()) << r.out;
  std::set<std::string> fields;
  if (!doc.ok()) return fields;
  for (const auto& [key, value] : doc->as_object()) {
    if (key == "tables") {
      for (const auto& [table, rows] : value.as_object()) {
        fields.insert(table);
        for (const JsonValue& row : rows.as_array()) {
          for (const auto& [field, v] : row.as_object()) fields.insert(field);
        }
      }
    } else {
      fields.insert(key);
    }
  }
  return fields;
}

TEST(DocsTest, EveryFieldAndMetricIsDocumented) {
  ScopedTempDir dir;
  WriteFile(dir.File("q.toml"), ReadFile(SourcePath("recipes/quickstart.toml")));
  WriteFile(dir.File("p.toml"), ReadFile(SourcePath("recipes/paper/r2e-gym-qwen3-14b.toml")));
  ASSERT_EQ(
      RunLibra({"compare", "-q", "--steps", "3", "--repeat", "2", "q.toml"}, dir.path()).exit_code,
      0);
  std::set<std::string> fields;
  const std::vector<std::vector<std::string>> commands = {
      {"report", "--json"},
      {"report", "--json", "8"},
      {"report", "--json", "--list"},
      {"run", "--json", "--steps", "2", "q.toml"},
      {"plan", "--json", "p.toml"},
      {"cost", "--json", "q.toml"},
      {"workload", "--json", "q.toml"},
      {"validate", "--json", "q.toml"},
  };
  for (const std::vector<std::string>& args : commands) {
    for (const std::string& f : Fields(args, dir.path().string())) fields.insert(f);
  }
  const std::set<std::string> documented = Documented();
  for (const std::string& f : fields) {
    // Cost's decode columns are named after the context lengths asked for.
    if (f.rfind("single_seq_tok_s_", 0) == 0 || f.rfind("saturated_tok_s_gpu_", 0) == 0) continue;
    EXPECT_TRUE(documented.count(f)) << "docs/reports.md does not document the field `" << f << "`";
  }
  for (const report::MetricDef& m : report::ExportedMetrics()) {
    EXPECT_TRUE(documented.count(m.name))
        << "docs/reports.md does not map the metric `" << m.name << "`";
  }
}

}  // namespace
}  // namespace libra::test
