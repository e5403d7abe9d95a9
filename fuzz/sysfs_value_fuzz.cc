// Fuzzes the parsers of single sysfs attribute values
// (agents/host/rdma_sysfs.h): counters, ports/N/rate and ports/N/state.
// Whatever a driver writes there is outside input.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agents/host/rdma_sysfs.h"

namespace {

using rocefab::hostd::ParseRate;
using rocefab::hostd::ParseStateNumber;
using rocefab::hostd::ParseSysfsCounter;
using rocefab::hostd::ValueParse;

// The largest rate ParseRate accepts is 1e6 Gb/s (1.25e14 bytes/s).
constexpr uint64_t kMaxBytesPerSecond = 125'000'000'000'000ULL;

void CheckCounter(std::string_view text) {
  uint64_t value = 0;
  const ValueParse result = ParseSysfsCounter(text, &value);
  if (result != ValueParse::kOk && result != ValueParse::kNotAvailable &&
      result != ValueParse::kGarbage)
    __builtin_trap();
  if (result != ValueParse::kOk) return;
  // A parsed value printed the way the kernel prints it parses back to the
  // same number, with or without the kernel's trailing newline.
  const std::string printed = std::to_string(value);
  for (const std::string& again : {printed, printed + "\n"}) {
    uint64_t reparsed = 0;
    if (ParseSysfsCounter(again, &reparsed) != ValueParse::kOk || reparsed != value)
      __builtin_trap();
  }
}

void CheckRate(std::string_view text) {
  uint64_t bytes_per_second = 0;
  if (!ParseRate(text, &bytes_per_second)) return;
  // An accepted rate is a real number: "nan Gb/sec" must be rejected, not
  // cast to an integer (undefined behaviour).
  const std::string whole(text);
  const size_t start = whole.find_first_not_of(" \t");
  const std::string number = whole.substr(start, whole.find(' ', start) - start);
  if (std::isnan(std::strtod(number.c_str(), nullptr))) __builtin_trap();
  if (bytes_per_second > kMaxBytesPerSecond) __builtin_trap();
  // Printed back in the kernel's format it parses to the same rate, give or
  // take the rounding to whole bytes.
  char printed[64];
  std::snprintf(printed, sizeof printed, "%.17g Gb/sec (4X NDR)\n",
                static_cast<double>(bytes_per_second) * 8.0 / 1e9);
  uint64_t reparsed = 0;
  if (!ParseRate(printed, &reparsed)) __builtin_trap();
  const uint64_t diff =
      reparsed > bytes_per_second ? reparsed - bytes_per_second : bytes_per_second - reparsed;
  if (diff > 1) __builtin_trap();
}

void CheckState(std::string_view text) {
  int number = 0;
  if (!ParseStateNumber(text, &number)) return;
  const std::string printed = std::to_string(number) + ": ACTIVE\n";
  int reparsed = 0;
  if (!ParseStateNumber(printed, &reparsed) || reparsed != number) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckCounter(text);
  CheckRate(text);
  CheckState(text);
  return 0;
}
