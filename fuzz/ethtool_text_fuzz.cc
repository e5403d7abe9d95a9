// Fuzzes the `ethtool -S` text parser and the mapping of its statistics onto
// the counter vocabulary (agents/host/ethtool_stats.h). The text comes from
// files written by the lab and fixtures, and its format from the driver.
// The same statistics, served by a driver through the ioctl's structures,
// must map alike through IoctlEthtoolSource::ReadInto, which keeps their
// positions, as through a read of names and values.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agents/host/ethtool_stats.h"
#include "agents/host/rdma_sysfs.h"
#include "common/counters.h"
#include "tests/support/fake_ethtool_driver.h"

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

  rocefab::testing::FakeEthtoolDriver driver;
  for (const auto& [name, value] : stats) driver.Add(name.substr(0, ETH_GSTRING_LEN - 1), value);
  rocefab::hostd::IoctlEthtoolSource source(std::ref(driver));
  NicReading read, kept;
  source.BeginPoll(1'000'000);
  if (!source.ReadInto("eth2", &kept).ok()) __builtin_trap();
  source.BeginPoll(1'100'000);  // the second poll uses the kept positions
  kept = NicReading{};
  if (!source.ReadInto("eth2", &kept).ok()) __builtin_trap();
  auto all = source.Read("eth2");
  if (!all.ok()) __builtin_trap();
  MapEthtoolStats(*all, &read);
  CheckMapped(kept);
  if (kept.counters.size() != read.counters.size() || kept.per_prio.size() != read.per_prio.size())
    __builtin_trap();
  for (const auto& [name, value] : read.counters)
    if (kept.counters.at(name) != value) __builtin_trap();
  for (const auto& [name, by_prio] : read.per_prio)
    for (const auto& [prio, value] : by_prio)
      if (kept.per_prio.at(name).at(prio) != value) __builtin_trap();
  return 0;
}
