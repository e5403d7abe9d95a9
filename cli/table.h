#pragma once
// Plain-text tables for people: left-aligned columns sized to their content.

#include <ostream>
#include <string>
#include <vector>

namespace rocefab::cli {

class Table final {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out) const;
  size_t rows() const { return rows_.size(); }

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// "3s ago", "2m ago", "never".
std::string Ago(int64_t now_us, int64_t then_us);
// 1234567.8 -> "1.23M"; small values keep two decimals.
std::string HumanRate(double per_second);

}  // namespace rocefab::cli
