// docs/counters.md is the operators' counter reference. This test keeps it in
// step with the vocabulary in common/counters.cc: each scope's table lists the
// same names in the same order, with the /metrics name MetricName() gives.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/counters.h"

namespace rocefab {
namespace {

constexpr char kDocPath[] = ROCEFAB_SOURCE_DIR "/docs/counters.md";

struct ScopeCase {
  v1::Scope scope;
  const char* heading;  // exact line in docs/counters.md
};

constexpr ScopeCase kScopes[] = {
    {v1::SCOPE_NIC, "## NIC port (scope `nic`)"},
    {v1::SCOPE_PORT, "## Switch port (scope `port`)"},
    {v1::SCOPE_QUEUE, "## Switch queue (scope `queue`)"},
    {v1::SCOPE_COLL, "## Collective (scope `coll`)"},
};

// One table row of a scope section.
struct Row {
  int line = 0;
  std::string name;                       // the backticked first cell
  std::vector<std::string> metric_names;  // every backticked `rocefab_...` token
};

struct Section {
  int headings = 0;  // how many times the heading occurs (want 1)
  std::vector<Row> rows;
  std::vector<std::string> problems;  // rows that could not be read
};

std::string_view TrimCell(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// The cells of "| a | b | c |".
std::vector<std::string_view> Cells(std::string_view line) {
  line = TrimCell(line);
  if (line.starts_with('|')) line.remove_prefix(1);
  if (line.ends_with('|')) line.remove_suffix(1);
  std::vector<std::string_view> cells;
  size_t start = 0;
  while (true) {
    const size_t bar = line.find('|', start);
    const size_t length = bar == std::string_view::npos ? std::string_view::npos : bar - start;
    cells.push_back(TrimCell(line.substr(start, length)));
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return cells;
}

// "|---|:--:|" and the like.
bool IsSeparator(std::string_view first_cell) {
  return !first_cell.empty() && first_cell.find_first_not_of("-: ") == std::string_view::npos;
}

// Every `...` span in `text`.
std::vector<std::string> CodeSpans(std::string_view text) {
  std::vector<std::string> spans;
  size_t pos = 0;
  while (true) {
    const size_t open = text.find('`', pos);
    if (open == std::string_view::npos) break;
    const size_t close = text.find('`', open + 1);
    if (close == std::string_view::npos) break;
    spans.emplace_back(text.substr(open + 1, close - open - 1));
    pos = close + 1;
  }
  return spans;
}

// docs/counters.md, split into the four scope sections. A section runs from
// its heading to the next "#" or "##" heading.
std::map<v1::Scope, Section> ReadDoc(std::string* error) {
  std::map<v1::Scope, Section> sections;
  for (const ScopeCase& c : kScopes) sections[c.scope];
  std::ifstream in(kDocPath);
  if (!in) {
    *error = std::string("cannot open ") + kDocPath;
    return sections;
  }
  Section* current = nullptr;
  std::string raw;
  int line_number = 0;
  while (std::getline(in, raw)) {
    ++line_number;
    const std::string_view line = TrimCell(raw);
    if (line.starts_with("# ") || line.starts_with("## ")) {
      current = nullptr;
      for (const ScopeCase& c : kScopes) {
        if (line == c.heading) {
          current = &sections[c.scope];
          ++current->headings;
        }
      }
      continue;
    }
    if (current == nullptr || !line.starts_with('|')) continue;
    const std::vector<std::string_view> cells = Cells(line);
    const std::string_view first = cells.front();
    if (first == "name" || IsSeparator(first)) continue;
    const std::vector<std::string> first_spans = CodeSpans(first);
    if (first_spans.size() != 1 || first.size() != first_spans[0].size() + 2) {
      current->problems.push_back(
          "line " + std::to_string(line_number) +
          ": the first column is not one `backticked` name: " + std::string(first));
      continue;
    }
    Row row;
    row.line = line_number;
    row.name = first_spans[0];
    for (std::string& span : CodeSpans(line))
      if (span.starts_with("rocefab_")) row.metric_names.push_back(std::move(span));
    current->rows.push_back(std::move(row));
  }
  return sections;
}

std::vector<std::string> NamesInDoc(const Section& section) {
  std::vector<std::string> names;
  for (const Row& row : section.rows) names.push_back(row.name);
  return names;
}

std::vector<std::string> NamesInCode(v1::Scope scope) {
  std::vector<std::string> names;
  for (const CounterDef& def : CountersOfScope(scope)) names.emplace_back(def.name);
  return names;
}

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// Says which names are missing, extra, repeated or out of order.
std::string DescribeDifference(const std::vector<std::string>& doc,
                               const std::vector<std::string>& code) {
  std::ostringstream out;
  const std::set<std::string> in_doc(doc.begin(), doc.end());
  const std::set<std::string> in_code(code.begin(), code.end());
  for (const std::string& name : code)
    if (!in_doc.contains(name))
      out << "\n  missing from docs/counters.md: " << name << " (in common/counters.cc)";
  for (const std::string& name : doc)
    if (!in_code.contains(name))
      out << "\n  extra in docs/counters.md: " << name << " (not in common/counters.cc)";
  std::set<std::string> seen;
  for (const std::string& name : doc)
    if (!seen.insert(name).second) out << "\n  listed twice in docs/counters.md: " << name;
  if (out.tellp() == 0) {
    const auto [doc_at, code_at] = std::mismatch(doc.begin(), doc.end(), code.begin(), code.end());
    if (doc_at != doc.end() && code_at != code.end())
      out << "\n  out of order: docs/counters.md has " << *doc_at
          << " where common/counters.cc has " << *code_at;
  }
  out << "\n  docs/counters.md:    " << Join(doc) << "\n  common/counters.cc: " << Join(code);
  return out.str();
}

class CountersDocTest : public ::testing::TestWithParam<ScopeCase> {
 protected:
  void SetUp() override {
    std::string error;
    sections_ = ReadDoc(&error);
    ASSERT_TRUE(error.empty()) << error;
  }
  const Section& section() { return sections_[GetParam().scope]; }
  std::map<v1::Scope, Section> sections_;
};

TEST_P(CountersDocTest, HasOneSectionWithReadableRows) {
  EXPECT_EQ(section().headings, 1)
      << "docs/counters.md needs exactly one heading line\n  " << GetParam().heading;
  for (const std::string& problem : section().problems) ADD_FAILURE() << problem;
}

TEST_P(CountersDocTest, ListsTheVocabularyInOrder) {
  const std::vector<std::string> doc = NamesInDoc(section());
  const std::vector<std::string> code = NamesInCode(GetParam().scope);
  ASSERT_FALSE(code.empty()) << "common/counters.cc has no entries of scope "
                             << ScopeName(GetParam().scope);
  EXPECT_TRUE(doc == code) << "section \"" << GetParam().heading << "\" differs from "
                           << "CountersOfScope(" << ScopeName(GetParam().scope)
                           << "):" << DescribeDifference(doc, code);
}

TEST_P(CountersDocTest, MetricNamesMatchMetricName) {
  const v1::Scope scope = GetParam().scope;
  for (const Row& row : section().rows) {
    const CounterDef* def = FindCounter(scope, row.name);
    if (def == nullptr) continue;  // reported by ListsTheVocabularyInOrder
    const std::string expected = MetricName(*def);
    if (row.metric_names.empty()) {
      ADD_FAILURE() << "docs/counters.md line " << row.line << ": " << row.name
                    << " has no /metrics name; want `" << expected << "`";
      continue;
    }
    for (const std::string& printed : row.metric_names)
      EXPECT_EQ(printed, expected) << "docs/counters.md line " << row.line << ": " << row.name
                                   << " has the wrong /metrics name";
  }
}

INSTANTIATE_TEST_SUITE_P(Scopes, CountersDocTest, ::testing::ValuesIn(kScopes),
                         [](const ::testing::TestParamInfo<ScopeCase>& info) {
                           return std::string(ScopeName(info.param.scope));
                         });

// CountersOfScope() returns one contiguous run per scope, so an entry added
// out of place in common/counters.cc would vanish from it. Check the whole
// table too.
TEST(CountersDoc, DocumentsEveryEntryOfTheCodeTable) {
  std::string error;
  const std::map<v1::Scope, Section> sections = ReadDoc(&error);
  ASSERT_TRUE(error.empty()) << error;
  size_t in_slices = 0;
  for (const ScopeCase& c : kScopes) in_slices += CountersOfScope(c.scope).size();
  EXPECT_EQ(in_slices, AllCounters().size())
      << "common/counters.cc: entries of one scope must be next to each other, in the order "
         "nic, port, queue, coll";
  for (const CounterDef& def : AllCounters()) {
    const auto section = sections.find(def.scope);
    if (section == sections.end()) {
      ADD_FAILURE() << "common/counters.cc: " << def.name << " has a scope ("
                    << ScopeName(def.scope) << ") with no section in docs/counters.md";
      continue;
    }
    const std::vector<std::string> doc = NamesInDoc(section->second);
    EXPECT_NE(std::find(doc.begin(), doc.end(), def.name), doc.end())
        << "missing from docs/counters.md: " << def.name << " (scope " << ScopeName(def.scope)
        << ")";
  }
}

}  // namespace
}  // namespace rocefab
