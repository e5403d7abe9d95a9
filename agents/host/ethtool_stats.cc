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

IoctlEthtoolSource::IoctlEthtoolSource() { fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0); }

IoctlEthtoolSource::~IoctlEthtoolSource() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<EthtoolStats> IoctlEthtoolSource::Read(const std::string& netdev) {
  if (fd_ < 0) return absl::UnavailableError("ethtool: cannot open an AF_INET socket");
  if (netdev.empty() || netdev.size() >= IFNAMSIZ)
    return absl::InvalidArgumentError(StrCat("ethtool: bad interface name '", netdev, "'"));
  auto ioctl_call = [&](void* data) {
    ifreq ifr{};
    std::memcpy(ifr.ifr_name, netdev.c_str(), netdev.size() + 1);
    ifr.ifr_data = static_cast<char*>(data);
    return ::ioctl(fd_, SIOCETHTOOL, &ifr);
  };
  auto error = [&](const char* what) {
    const int err = errno;
    std::string message = StrCat("ethtool ", what, " on ", netdev, ": ", std::strerror(err));
    return err == ENODEV ? absl::NotFoundError(message) : absl::UnavailableError(message);
  };

  // How many statistics: ETHTOOL_GSSET_INFO with the ETH_SS_STATS bit.
  // The reply's data[] holds one length per bit set in sset_mask.
  alignas(ethtool_sset_info) uint8_t sset_buf[sizeof(ethtool_sset_info) + sizeof(uint32_t)] = {};
  auto* sset = reinterpret_cast<ethtool_sset_info*>(sset_buf);
  sset->cmd = ETHTOOL_GSSET_INFO;
  sset->sset_mask = 1ULL << ETH_SS_STATS;
  if (ioctl_call(sset) < 0) return error("GSSET_INFO");
  if (!(sset->sset_mask & (1ULL << ETH_SS_STATS))) return EthtoolStats{};
  const uint32_t count = sset->data[0];
  if (count == 0) return EthtoolStats{};
  if (count > 65536) return absl::UnavailableError(StrCat("ethtool: ", netdev, " reports ", count, " statistics"));

  std::vector<uint8_t> strings(sizeof(ethtool_gstrings) + size_t{count} * ETH_GSTRING_LEN);
  auto* gstrings = reinterpret_cast<ethtool_gstrings*>(strings.data());
  gstrings->cmd = ETHTOOL_GSTRINGS;
  gstrings->string_set = ETH_SS_STATS;
  gstrings->len = count;
  if (ioctl_call(gstrings) < 0) return error("GSTRINGS");

  std::vector<uint8_t> values(sizeof(ethtool_stats) + size_t{count} * sizeof(uint64_t));
  auto* gstats = reinterpret_cast<ethtool_stats*>(values.data());
  gstats->cmd = ETHTOOL_GSTATS;
  gstats->n_stats = count;
  if (ioctl_call(gstats) < 0) return error("GSTATS");

  // The driver may report fewer than it announced if its set changed.
  const uint32_t n = std::min({count, gstrings->len, gstats->n_stats});
  EthtoolStats out;
  out.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    const char* name = reinterpret_cast<const char*>(gstrings->data + size_t{i} * ETH_GSTRING_LEN);
    std::string_view view(name, strnlen(name, ETH_GSTRING_LEN));
    out.emplace_back(std::string(Trim(view)), gstats->data[i]);
  }
  return out;
}

absl::StatusOr<EthtoolStats> TextEthtoolSource::Read(const std::string& netdev) {
  auto text = files_.ReadFile(StrCat(netdev, "/statistics"));
  if (!text.ok()) return text.status();
  uint64_t bad = 0;
  return ParseEthtoolText(*text, &bad);
}

EthtoolStats ParseEthtoolText(std::string_view text, uint64_t* bad_lines) {
  EthtoolStats out;
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
    out.emplace_back(std::string(name), value);
  }
  return out;
}

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
struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
using EthtoolIndexMap = std::unordered_map<std::string, EthtoolTarget, NameHash, std::equal_to<>>;

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

}  // namespace

void MapEthtoolStats(const EthtoolStats& stats, NicReading* nic) {
  const auto& index = EthtoolIndex();
  for (const auto& [raw_name, value] : stats) {
    auto it = index.find(Trim(raw_name));
    if (it == index.end()) continue;
    const CounterDef& def = *it->second.def;
    if (def.per_prio) nic->per_prio[def][it->second.prio] = value;
    else nic->counters[def] = value;
  }
}

}  // namespace rocefab::hostd
