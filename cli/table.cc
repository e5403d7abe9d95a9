#include "cli/table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace rocefab::cli {

void Table::Print(std::ostream& out) const {
  std::vector<size_t> widths(headers_.size());
  for (size_t i = 0; i < headers_.size(); ++i) widths[i] = headers_[i].size();
  for (const auto& row : rows_)
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i)
      widths[i] = std::max(widths[i], row[i].size());
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string& cell = i < row.size() ? row[i] : std::string();
      line += cell;
      if (i + 1 < widths.size()) line += std::string(widths[i] - cell.size() + 2, ' ');
    }
    out << line << "\n";
  };
  print_row(headers_);
  for (const auto& row : rows_) print_row(row);
}

std::string Ago(int64_t now_us, int64_t then_us) {
  if (then_us <= 0) return "never";
  const int64_t seconds = std::max<int64_t>(0, (now_us - then_us) / 1'000'000);
  if (seconds < 120) return std::to_string(seconds) + "s ago";
  if (seconds < 7200) return std::to_string(seconds / 60) + "m ago";
  if (seconds < 172800) return std::to_string(seconds / 3600) + "h ago";
  return std::to_string(seconds / 86400) + "d ago";
}

std::string HumanRate(double per_second) {
  char buf[32];
  const double magnitude = std::fabs(per_second);
  if (magnitude >= 1e9) std::snprintf(buf, sizeof buf, "%.2fG", per_second / 1e9);
  else if (magnitude >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", per_second / 1e6);
  else if (magnitude >= 1e3) std::snprintf(buf, sizeof buf, "%.2fk", per_second / 1e3);
  else std::snprintf(buf, sizeof buf, "%.2f", per_second);
  return buf;
}

}  // namespace rocefab::cli
