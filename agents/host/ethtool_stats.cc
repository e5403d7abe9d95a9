#include "agents/host/ethtool_stats.h"

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <unordered_map>

#include "common/strings.h"
#include "common/counters.h"
#include "common/fs_root.h"

namespace rocefab::hostd {
namespace {

// "rx_prio{prio}_pause" -> "rx_prio3_pause".
std::string ExpandPrio(std::string_view pattern, uint32_t prio) {
  std::string out(pattern);
  const size_t at = out.find("{prio}");
  if (at != std::string::npos) out.replace(at, 6, std::to_string(prio));
  return out;
}

struct EthtoolTarget {
  const CounterDef* def;
  uint32_t prio;  // for per-priority counters
};

// Looked up by std::string_view: no key string built per statistic.
using EthtoolIndexMap = StringMap<EthtoolTarget>;

// Statistic name -> vocabulary entry, built once from common/counters.
const EthtoolIndexMap& EthtoolIndex() {
  static const auto* index = [] {
    auto* map = new EthtoolIndexMap();
    for (const CounterDef& def : CountersOfScope(v1::SCOPE_NIC)) {
      if (def.source != CounterSource::kEthtool) continue;
      if (def.per_prio) {
        for (uint32_t prio = 0; prio < 8; ++prio)
          (*map)[ExpandPrio(def.source_name, prio)] = {&def, prio};
      } else {
        (*map)[std::string(def.source_name)] = {&def, 0};
      }
    }
    return map;
  }();
  return *index;
}

// Puts one statistic into `nic` when the vocabulary knows its name.
void MapOne(std::string_view raw_name, uint64_t value, NicReading* nic) {
  const auto& index = EthtoolIndex();
  auto it = index.find(Trim(raw_name));
  if (it == index.end()) return;
  const CounterDef& def = *it->second.def;
  if (def.per_prio) nic->per_prio[def][it->second.prio] = value;
  else nic->counters[def] = value;
}

// Walks `ethtool -S` text, calling fn(name, value) for each good line.
template <class Fn>
void ForEachEthtoolLine(std::string_view text, uint64_t* bad_lines, Fn&& fn) {
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    std::string_view trimmed = Trim(line);
    if (trimmed.empty() || trimmed == "NIC statistics:") continue;
    size_t colon = trimmed.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      ++*bad_lines;
      continue;
    }
    std::string_view name = Trim(trimmed.substr(0, colon));
    std::string_view number = Trim(trimmed.substr(colon + 1));
    uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (name.empty() || number.empty() || ec != std::errc() ||
        ptr != number.data() + number.size()) {
      ++*bad_lines;
      continue;
    }
    fn(name, value);
  }
}

}  // namespace

absl::Status EthtoolSource::ReadInto(const std::string& netdev, NicReading* nic) {
  auto stats = Read(netdev);
  if (!stats.ok()) return stats.status();
  MapEthtoolStats(*stats, nic);
  return absl::OkStatus();
}

IoctlEthtoolSource::IoctlEthtoolSource() {
  fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  ioctl_ = [fd = fd_](const char* ifname, void* data) {
    ifreq ifr{};
    std::memcpy(ifr.ifr_name, ifname, std::strlen(ifname) + 1);
    ifr.ifr_data = static_cast<char*>(data);
    return ::ioctl(fd, SIOCETHTOOL, &ifr);
  };
}

IoctlEthtoolSource::IoctlEthtoolSource(Ioctl ioctl) : ioctl_(std::move(ioctl)) {}

IoctlEthtoolSource::~IoctlEthtoolSource() {
  if (fd_ >= 0) ::close(fd_);
}

int IoctlEthtoolSource::Call(const std::string& netdev, void* data) {
  return ioctl_(netdev.c_str(), data);
}

absl::Status IoctlEthtoolSource::Error(const std::string& netdev, const char* what) const {
  const int err = errno;
  std::string message = StrCat("ethtool ", what, " on ", netdev, ": ", std::strerror(err));
  return err == ENODEV ? absl::NotFoundError(message) : absl::UnavailableError(message);
}

// How many statistics: ETHTOOL_GSSET_INFO with the ETH_SS_STATS bit. The
// reply's data[] holds one length per bit set in sset_mask.
absl::StatusOr<uint32_t> IoctlEthtoolSource::Count(const std::string& netdev) {
  if (!ioctl_) return absl::UnavailableError("ethtool: cannot open an AF_INET socket");
  if (netdev.empty() || netdev.size() >= IFNAMSIZ)
    return absl::InvalidArgumentError(StrCat("ethtool: bad interface name '", netdev, "'"));
  alignas(ethtool_sset_info) uint8_t sset_buf[sizeof(ethtool_sset_info) + sizeof(uint32_t)] = {};
  auto* sset = reinterpret_cast<ethtool_sset_info*>(sset_buf);
  sset->cmd = ETHTOOL_GSSET_INFO;
  sset->sset_mask = 1ULL << ETH_SS_STATS;
  if (Call(netdev, sset) < 0) return Error(netdev, "GSSET_INFO");
  if (!(sset->sset_mask & (1ULL << ETH_SS_STATS))) return 0u;
  const uint32_t count = sset->data[0];
  if (count > 65536) return absl::UnavailableError(StrCat("ethtool: ", netdev, " reports ", count, " statistics"));
  return count;
}

// The names, into names_ (an ethtool_gstrings).
absl::Status IoctlEthtoolSource::Names(const std::string& netdev, uint32_t count) {
  names_.assign(sizeof(ethtool_gstrings) + size_t{count} * ETH_GSTRING_LEN, 0);
  auto* gstrings = reinterpret_cast<ethtool_gstrings*>(names_.data());
  gstrings->cmd = ETHTOOL_GSTRINGS;
  gstrings->string_set = ETH_SS_STATS;
  gstrings->len = count;
  if (Call(netdev, gstrings) < 0) return Error(netdev, "GSTRINGS");
  return absl::OkStatus();
}

// The values, into values_ (an ethtool_stats).
absl::Status IoctlEthtoolSource::Values(const std::string& netdev, uint32_t count) {
  values_.assign(sizeof(ethtool_stats) + size_t{count} * sizeof(uint64_t), 0);
  auto* gstats = reinterpret_cast<ethtool_stats*>(values_.data());
  gstats->cmd = ETHTOOL_GSTATS;
  gstats->n_stats = count;
  if (Call(netdev, gstats) < 0) return Error(netdev, "GSTATS");
  return absl::OkStatus();
}

absl::StatusOr<EthtoolStats> IoctlEthtoolSource::Read(const std::string& netdev) {
  auto count = Count(netdev);
  if (!count.ok()) return count.status();
  if (*count == 0) return EthtoolStats{};
  if (auto status = Names(netdev, *count); !status.ok()) return status;
  ++name_reads_;
  if (auto status = Values(netdev, *count); !status.ok()) return status;
  const auto* gstrings = reinterpret_cast<const ethtool_gstrings*>(names_.data());
  const auto* gstats = reinterpret_cast<const ethtool_stats*>(values_.data());
  // The driver may report fewer than it announced if its set changed.
  const uint32_t n = std::min({*count, gstrings->len, gstats->n_stats});
  EthtoolStats out;
  out.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    const char* name = reinterpret_cast<const char*>(gstrings->data + size_t{i} * ETH_GSTRING_LEN);
    std::string_view view(name, strnlen(name, ETH_GSTRING_LEN));
    out.emplace_back(std::string(Trim(view)), gstats->data[i]);
  }
  return out;
}

absl::Status IoctlEthtoolSource::ReadInto(const std::string& netdev, NicReading* nic) {
  auto count = Count(netdev);
  if (!count.ok()) {
    if (absl::IsNotFound(count.status())) layouts_.erase(netdev);
    return count.status();
  }
  if (*count == 0) return absl::OkStatus();
  Layout& layout = layouts_[netdev];
  const bool stale = layout.count != *count || layout.read_us == 0 || now_us_ < layout.read_us ||
                     now_us_ - layout.read_us >= kNamesMaxAgeUs;
  if (stale) {
    if (auto status = Names(netdev, *count); !status.ok()) {
      layouts_.erase(netdev);
      return status;
    }
    ++name_reads_;
    layout = Layout{*count, now_us_, {}};
    const auto* gstrings = reinterpret_cast<const ethtool_gstrings*>(names_.data());
    const uint32_t n = std::min(*count, gstrings->len);
    const auto& index = EthtoolIndex();
    for (uint32_t i = 0; i < n; ++i) {
      const char* name = reinterpret_cast<const char*>(gstrings->data + size_t{i} * ETH_GSTRING_LEN);
      auto it = index.find(Trim(std::string_view(name, strnlen(name, ETH_GSTRING_LEN))));
      if (it != index.end()) layout.wanted.push_back({i, it->second.def, it->second.prio});
    }
  }
  if (auto status = Values(netdev, *count); !status.ok()) {
    layouts_.erase(netdev);
    return status;
  }
  const auto* gstats = reinterpret_cast<const ethtool_stats*>(values_.data());
  if (gstats->n_stats != layout.count) {
    // The set changed between the count and the values: the positions are
    // not to be trusted. Read names and values together, this once.
    layouts_.erase(netdev);
    return EthtoolSource::ReadInto(netdev, nic);
  }
  for (const Layout::Wanted& w : layout.wanted) {
    if (w.def->per_prio) nic->per_prio[*w.def][w.prio] = gstats->data[w.index];
    else nic->counters[*w.def] = gstats->data[w.index];
  }
  return absl::OkStatus();
}

absl::StatusOr<EthtoolStats> TextEthtoolSource::Read(const std::string& netdev) {
  auto text = files_.ReadFile(StrCat(netdev, "/statistics"));
  if (!text.ok()) return text.status();
  uint64_t bad = 0;
  return ParseEthtoolText(*text, &bad);
}

absl::Status TextEthtoolSource::ReadInto(const std::string& netdev, NicReading* nic) {
  auto text = files_.ReadFile(StrCat(netdev, "/statistics"));
  if (!text.ok()) return text.status();
  uint64_t bad = 0;
  ForEachEthtoolLine(*text, &bad, [&](std::string_view name, uint64_t value) { MapOne(name, value, nic); });
  return absl::OkStatus();
}

EthtoolStats ParseEthtoolText(std::string_view text, uint64_t* bad_lines) {
  EthtoolStats out;
  ForEachEthtoolLine(text, bad_lines,
                     [&](std::string_view name, uint64_t value) { out.emplace_back(std::string(name), value); });
  return out;
}

void MapEthtoolStats(const EthtoolStats& stats, NicReading* nic) {
  for (const auto& [raw_name, value] : stats) MapOne(raw_name, value, nic);
}

}  // namespace rocefab::hostd
