// The switch agent's file backend parser (counters.json written by the lab).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agents/switch/file_backend.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return 0;
  auto reading = rocefab::switchd::ParseSwitchCountersJson(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!reading.ok()) return 0;
  for (const auto& [name, port] : reading->ports) {
    if (name.empty()) __builtin_trap();
    for (const auto& [counter, by_prio] : port.per_prio)
      for (const auto& [prio, value] : by_prio)
        if (prio >= 64) __builtin_trap();
  }
  return 0;
}
