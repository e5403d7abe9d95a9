#pragma once
// String concatenation that takes std::string_view, std::string, C strings,
// numbers, enums and absl::string_view alike. (Debian's Abseil keeps its own
// string_view type, so absl::StrCat does not accept std::string_view.)

#include <charconv>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "absl/strings/string_view.h"

namespace rocefab {

// A map keyed by std::string that is looked up by std::string_view (or a C
// string) without building a key string per lookup.
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>()(s); }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringViewHash, std::equal_to<>>;

namespace strings_internal {

inline void AppendOne(std::string& out, std::string_view v) { out.append(v); }
inline void AppendOne(std::string& out, const std::string& v) { out.append(v); }
inline void AppendOne(std::string& out, const char* v) { out.append(v ? v : "(null)"); }
inline void AppendOne(std::string& out, char c) { out.push_back(c); }
inline void AppendOne(std::string& out, bool b) { out.append(b ? "true" : "false"); }
#if !defined(ABSL_USES_STD_STRING_VIEW) || !ABSL_USES_STD_STRING_VIEW
inline void AppendOne(std::string& out, absl::string_view v) { out.append(v.data(), v.size()); }
#endif

template <typename T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char>)
void AppendOne(std::string& out, T v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

template <typename T>
  requires std::is_floating_point_v<T>
void AppendOne(std::string& out, T v) {
  char buf[32];
  int n = std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  out.append(buf, n > 0 ? static_cast<size_t>(n) : 0);
}

template <typename T>
  requires std::is_enum_v<T>
void AppendOne(std::string& out, T v) {
  AppendOne(out, static_cast<std::underlying_type_t<T>>(v));
}

}  // namespace strings_internal

template <typename... Args>
void StrAppend(std::string* out, const Args&... args) {
  (strings_internal::AppendOne(*out, args), ...);
}

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  (strings_internal::AppendOne(out, args), ...);
  return out;
}

// absl::Status::message() as a std::string.
template <typename StatusLike>
std::string Message(const StatusLike& status) {
  auto m = status.message();
  return std::string(m.data(), m.size());
}

// A whole decimal string as an unsigned integer: no sign, no spaces, no
// trailing characters; false (and *out unchanged or partial) otherwise.
template <typename T>
  requires std::is_unsigned_v<T>
bool ParseDecimal(std::string_view text, T* out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// `v` with `digits` decimals: Fixed(0.8125, 2) == "0.81".
inline std::string Fixed(double v, int digits) {
  char buf[64];
  const int n = std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return std::string(buf, n > 0 && n < static_cast<int>(sizeof buf) ? static_cast<size_t>(n) : 0);
}

}  // namespace rocefab
