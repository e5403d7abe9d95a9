// Fuzzes the `ethtool -S` text parser and the mapping of its statistics onto
// the counter vocabulary (agents/host/ethtool_stats.h). The text comes from
// files written by the lab and fixtures, and its format from the driver.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agents/host/ethtool_stats.h"
#include "agents/host/rdma_sysfs.h"
#include "common/counters.h"

namespace {

using rocefab::CounterDef;
using rocefab::CounterSource;
using rocefab::hostd::EthtoolStats;
using rocefab::hostd::MapEthtoolStats;
using rocefab::hostd::NicReading;
using rocefab::hostd::ParseEthtoolText;

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

void CheckParsed(std::string_view text, const EthtoolStats& stats, uint64_t bad_lines) {
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  if (!text.empty() && text.back() != '\n') ++lines;
  if (stats.size() + bad_lines > lines) __builtin_trap();

  std::string printed = "NIC statistics:\n";
  for (const auto& [name, value] : stats) {
    if (name.empty()) __builtin_trap();
    if (name.find('\n') != std::string::npos) __builtin_trap();
    // Names are trimmed.
    if (IsBlank(name.front()) || IsBlank(name.back()) || name.back() == '\r') __builtin_trap();
    printed += "     " + name + ": " + std::to_string(value) + "\n";
  }
  // Printed back in `ethtool -S` format, the statistics parse to themselves.
  uint64_t bad_again = 0;
  if (ParseEthtoolText(printed, &bad_again) != stats || bad_again != 0) __builtin_trap();
}

void CheckMapped(const NicReading& nic) {
  for (const auto& [name, value] : nic.counters) {
    const CounterDef* def = rocefab::FindCounter(rocefab::v1::SCOPE_NIC, name);
    if (def == nullptr || def->source != CounterSource::kEthtool || def->per_prio) __builtin_trap();
  }
  for (const auto& [name, by_prio] : nic.per_prio) {
    const CounterDef* def = rocefab::FindCounter(rocefab::v1::SCOPE_NIC, name);
    if (def == nullptr || def->source != CounterSource::kEthtool || !def->per_prio)
      __builtin_trap();
    if (by_prio.empty()) __builtin_trap();
    for (const auto& [prio, value] : by_prio)
      if (prio > 7) __builtin_trap();
  }
  // Ethtool statistics never touch what sysfs and netlink own.
  if (nic.link_up.has_value() || nic.rate_bytes_per_second.has_value()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  uint64_t bad_lines = 0;
  const EthtoolStats stats = ParseEthtoolText(text, &bad_lines);
  CheckParsed(text, stats, bad_lines);

  NicReading nic;
  nic.device = "mlx5_0";
  nic.netdev = "eth2";
  MapEthtoolStats(stats, &nic);
  CheckMapped(nic);
  return 0;
}
