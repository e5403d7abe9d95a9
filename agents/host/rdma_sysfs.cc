#include "agents/host/rdma_sysfs.h"

#include <charconv>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "common/strings.h"
#include "common/counters.h"
#include "common/log.h"

namespace rocefab::hostd {
namespace {
constexpr char kRdmaSysfsLog[] = "sysfs";
constexpr char kInfiniband[] = "class/infiniband";
}  // namespace

ValueParse ParseSysfsCounter(std::string_view text, uint64_t* value) {
  text = Trim(text);
  if (text.starts_with("N/A")) return ValueParse::kNotAvailable;
  if (text.empty()) return ValueParse::kGarbage;
  uint64_t parsed = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (ec != std::errc() || ptr != text.data() + text.size()) return ValueParse::kGarbage;
  *value = parsed;
  return ValueParse::kOk;
}

bool ParseRate(std::string_view text, uint64_t* bytes_per_second) {
  // The kernel prints "%d%s Gb/sec (%dX %s)", e.g. "2.5 Gb/sec (1X SDR)" or
  // "400 Gb/sec (4X NDR)".
  text = Trim(text);
  size_t space = text.find(' ');
  if (space == std::string_view::npos) return false;
  std::string_view number = text.substr(0, space);
  std::string_view rest = text.substr(space + 1);
  if (!rest.starts_with("Gb/sec")) return false;
  double gbits = 0;
  // Written so that NaN fails too.
  if (!absl::SimpleAtod(absl::string_view(number.data(), number.size()), &gbits) ||
      !(gbits >= 0 && gbits <= 1e6))
    return false;
  *bytes_per_second = static_cast<uint64_t>(gbits * 1e9 / 8.0 + 0.5);
  return true;
}

bool ParseStateNumber(std::string_view text, int* number) {
  text = Trim(text);
  size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  int parsed = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + colon, parsed);
  if (ec != std::errc() || ptr != text.data() + colon) return false;
  *number = parsed;
  return true;
}

std::vector<NicReading> RdmaSysfsReader::ReadAll(ReadHealth* health, int64_t now_us) {
  files_.BeginPoll(now_us);
  now_us_ = now_us;
  std::vector<NicReading> nics;
  auto devices = files_.ListDir(kInfiniband);
  if (!devices.ok()) {
    if (!absl::IsNotFound(devices.status())) {
      ++health->source_errors;
      LOG_WARN(kRdmaSysfsLog, devices.status().message());
    }
    return nics;
  }
  nics.reserve(devices->size());
  for (const std::string& device : *devices) {
    const std::string device_dir = StrCat(kInfiniband, "/", device);
    std::string netdev;
    if (auto nets = files_.ListDir(StrCat(device_dir, "/device/net")); nets.ok() &&
                                                                             !nets->empty())
      netdev = nets->front();
    auto ports = files_.ListDir(StrCat(device_dir, "/ports"));
    if (!ports.ok()) {
      ++health->source_errors;
      LOG_WARN(kRdmaSysfsLog, "device ", device, ": ", ports.status().message());
      continue;
    }
    for (const std::string& port_name : *ports) {
      uint32_t port = 0;
      if (!absl::SimpleAtoi(absl::string_view(port_name), &port)) {
        ++health->parse_errors;
        continue;
      }
      NicReading nic;
      nic.device = device;
      nic.port = port;
      nic.netdev = netdev;
      ReadPort(StrCat(device_dir, "/ports/", port_name), &nic, health);
      nics.push_back(std::move(nic));
    }
  }
  return nics;
}

bool RdmaSysfsReader::ReadNetlink(const NicReading& nic) {
  netlink_values_.clear();
  if (netlink_ == nullptr || !netlink_->available()) return false;
  if (auto off = netlink_off_until_us_.find(nic.device); off != netlink_off_until_us_.end()) {
    if (now_us_ != 0 && now_us_ < off->second) return false;
    netlink_off_until_us_.erase(off);
  }
  auto reply = netlink_->HwCounters(nic.device, nic.port);
  if (!reply.ok()) {
    ++netlink_failures_;
    netlink_off_until_us_[nic.device] = now_us_ + kNetlinkRetryUs;
    LOG_WARN(kRdmaSysfsLog, nic.device, " port ", nic.port, ": ", reply.status().message(),
             "; reading its hw_counters from sysfs for 30 s");
    return false;
  }
  netlink_reply_ = std::move(*reply);
  for (const auto& [name, value] : netlink_reply_) netlink_values_[name] = value;
  ++netlink_ports_;
  return true;
}

void RdmaSysfsReader::ReadPort(const std::string& port_dir, NicReading* nic,
                               ReadHealth* health) {
  // Reads one counter file. N/A and garbage are counted here; a missing
  // file is left to the caller, which may have a fallback file.
  enum class Read { kOk, kMissing, kCounted };
  auto read_value = [&](const std::string& dir, std::string_view name, uint64_t* value) {
    auto text = files_.ReadFileIn(dir, name);
    if (!text.ok()) {
      if (absl::IsNotFound(text.status())) return Read::kMissing;
      ++health->skipped_values;  // EIO and friends: the firmware would not answer
      return Read::kCounted;
    }
    switch (ParseSysfsCounter(*text, value)) {
      case ValueParse::kOk: return Read::kOk;
      case ValueParse::kNotAvailable: ++health->skipped_values; return Read::kCounted;
      case ValueParse::kGarbage:
        ++health->parse_errors;
        LOG_DEBUG(kRdmaSysfsLog, dir, "/", name, ": not a counter value");
        return Read::kCounted;
    }
    return Read::kCounted;
  };

  const std::string counters_dir = StrCat(port_dir, "/counters");
  const std::string counters_ext_dir = StrCat(port_dir, "/counters_ext");
  const std::string hw_counters_dir = StrCat(port_dir, "/hw_counters");
  const bool from_netlink = ReadNetlink(*nic);
  for (const CounterDef& def : CountersOfScope(v1::SCOPE_NIC)) {
    uint64_t value = 0;
    Read result;
    if (def.source == CounterSource::kSysfsCounters) {
      result = read_value(counters_dir, def.source_name, &value);
      // The 64-bit counters_ext file stands in when the PMA counter is
      // missing or unreadable.
      if (result != Read::kOk && !def.source_ext_name.empty()) {
        const Read ext = read_value(counters_ext_dir, def.source_ext_name, &value);
        if (ext == Read::kOk) result = Read::kOk;
        else if (ext == Read::kCounted) result = Read::kCounted;
      }
    } else if (def.source == CounterSource::kSysfsHwCounters) {
      auto it = from_netlink ? netlink_values_.find(def.source_name) : netlink_values_.end();
      if (it != netlink_values_.end()) {
        value = it->second;
        result = Read::kOk;
      } else {
        result = read_value(hw_counters_dir, def.source_name, &value);
      }
    } else {
      continue;
    }
    if (result == Read::kOk) nic->counters[def] = value * def.multiplier;
    else if (result == Read::kMissing) ++health->skipped_values;
  }

  if (auto rate = files_.ReadFileIn(port_dir, "rate"); rate.ok()) {
    uint64_t bps = 0;
    if (ParseRate(*rate, &bps)) nic->rate_bytes_per_second = bps;
    else ++health->parse_errors;
  } else {
    ++health->skipped_values;
  }
  // IB port state 4 is ACTIVE; phys_state 5 is LinkUp. The link is up when
  // the physical layer is up, even while the logical state is still INIT.
  // `state` is read only where phys_state does not answer.
  int phys = 0, state = 0;
  auto phys_text = files_.ReadFileIn(port_dir, "phys_state");
  if (phys_text.ok() && ParseStateNumber(*phys_text, &phys)) {
    nic->link_up = phys == 5;
    return;
  }
  auto state_text = files_.ReadFileIn(port_dir, "state");
  if (state_text.ok() && ParseStateNumber(*state_text, &state)) {
    nic->link_up = state == 4;
  } else if (phys_text.ok() || state_text.ok()) {
    ++health->parse_errors;
  } else {
    ++health->skipped_values;
  }
}

std::map<std::string, std::string> NicFirmwareVersions(const FsRoot& sysfs) {
  std::map<std::string, std::string> out;
  auto devices = sysfs.ListDir("class/infiniband");
  if (!devices.ok()) return out;
  for (const auto& device : *devices) {
    auto text = sysfs.ReadFile(StrCat("class/infiniband/", device, "/fw_ver"));
    if (!text.ok()) continue;
    std::string version = *text;
    while (!version.empty() && (version.back() == '\n' || version.back() == ' ')) version.pop_back();
    if (!version.empty() && version.size() <= 64) out[device] = version;
  }
  return out;
}

}  // namespace rocefab::hostd
