#include "common/nearest.h"

#include <algorithm>
#include <cctype>
#include <tuple>

#include "common/strings.h"

namespace rocefab {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<std::string> NearestNames(std::string_view word, const std::vector<std::string>& known, size_t limit) {
  std::vector<std::tuple<size_t, bool, const std::string*>> scored;
  scored.reserve(known.size());
  for (const std::string& name : known)
    scored.emplace_back(EditDistance(word, name), !name.starts_with(word), &name);
  const size_t n = std::min(limit, scored.size());
  std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(n), scored.end(),
                    [](const auto& a, const auto& b) {
                      return std::tie(std::get<0>(a), std::get<1>(a), *std::get<2>(a)) <
                             std::tie(std::get<0>(b), std::get<1>(b), *std::get<2>(b));
                    });
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back(*std::get<2>(scored[i]));
  return out;
}

std::string NearestHint(std::string_view word, const std::vector<std::string>& known, size_t limit) {
  const std::vector<std::string> names = NearestNames(word, known, limit);
  if (names.empty()) return "";
  std::string hint = "; nearest known: ";
  for (size_t i = 0; i < names.size(); ++i) StrAppend(&hint, i ? ", " : "", names[i]);
  return hint;
}

}  // namespace rocefab
