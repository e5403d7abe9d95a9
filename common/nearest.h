#pragma once
// "Did you mean": the known names closest to a mistyped one, for errors
// that name what exists (an unknown host, port or subcommand).

#include <string>
#include <string_view>
#include <vector>

namespace rocefab {

// Levenshtein distance, ASCII case-insensitive.
size_t EditDistance(std::string_view a, std::string_view b);

// Up to `limit` of `known`, closest to `word` first (names that start with
// `word` rank before others at the same distance). Empty when `known` is.
std::vector<std::string> NearestNames(std::string_view word, const std::vector<std::string>& known,
                                      size_t limit = 3);

// "; nearest known: a, b, c", or "" when there is none.
std::string NearestHint(std::string_view word, const std::vector<std::string>& known, size_t limit = 3);

}  // namespace rocefab
