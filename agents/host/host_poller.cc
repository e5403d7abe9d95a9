#include "agents/host/host_poller.h"

#include <utility>

#include "common/strings.h"
#include "common/counters.h"
#include "common/log.h"

namespace rocefab::hostd {
namespace {
constexpr char kHostPollerLog[] = "poller";
}

HostPoller::HostPoller(std::string host, Sources sources, const Clock& clock)
    : host_(std::move(host)), sources_(sources), clock_(clock), sysfs_(*sources.sysfs, sources.hw_counters) {}

HostSnapshot HostPoller::Poll() {
  HostSnapshot snapshot;
  snapshot.host = host_;
  snapshot.timestamp_us = clock_.NowUs();
  snapshot.previous_us = std::exchange(last_read_us_, snapshot.timestamp_us);
  ReadHealth& sysfs_health = snapshot.by_source["sysfs"];
  ReadHealth& ethtool_health = snapshot.by_source["ethtool"];
  ReadHealth& netlink_health = snapshot.by_source["netlink"];
  snapshot.nics = sysfs_.ReadAll(&sysfs_health, snapshot.timestamp_us);
  if (sources_.ethtool != nullptr) sources_.ethtool->BeginPoll(snapshot.timestamp_us);
  const bool read_roce = roce_read_us_ == 0 || snapshot.timestamp_us - roce_read_us_ >= 30'000'000 ||
                         snapshot.timestamp_us < roce_read_us_;
  if (read_roce) {
    roce_.clear();
    roce_read_us_ = snapshot.timestamp_us;
  }
  ports_.clear();
  for (const NicReading& nic : snapshot.nics) ports_.push_back({nic.device, nic.netdev, nic.port});
  for (NicReading& nic : snapshot.nics) {
    // The RoCE settings `rocefab check roce` compares with the switch.
    const std::string key = StrCat(nic.device, "/", nic.port);
    if (read_roce || !roce_.count(key)) {
      RoceSettings roce = ReadRoceFiles(*sources_.sysfs, nic.device, nic.port, nic.netdev, &sysfs_health);
      if (sources_.dcb != nullptr && !nic.netdev.empty()) {
        auto dcb = sources_.dcb->Read(nic.netdev);
        if (dcb.ok()) MergeDcb(*dcb, &roce);
        else LOG_DEBUG(kHostPollerLog, dcb.status().message());  // no DCB (a VF, veth): the settings are unknown
      }
      roce_[key] = std::move(roce);
    }
    AddRoceSettings(roce_[key], &nic);
    if (nic.netdev.empty()) continue;
    if (sources_.ethtool != nullptr) {
      if (auto status = sources_.ethtool->ReadInto(nic.netdev, &nic); !status.ok()) {
        ++ethtool_health.source_errors;
        LOG_DEBUG(kHostPollerLog, status.message());
      }
    }
    if (sources_.links != nullptr) {
      auto link = sources_.links->Read(nic.netdev);
      if (link.ok()) {
        // Netlink carrier is the Ethernet truth; it overrides sysfs state.
        nic.link_up = link->carrier;
        if (link->has_carrier_changes) nic.counters["carrier_changes"] = link->carrier_changes;
      } else if (!absl::IsNotFound(link.status())) {
        ++netlink_health.source_errors;
        LOG_DEBUG(kHostPollerLog, link.status().message());
      }
    }
  }
  for (const auto& [source, health] : snapshot.by_source) snapshot.health.Add(health);
  return snapshot;
}

HostSnapshot HostPoller::PollPfc() {
  HostSnapshot snapshot;
  snapshot.host = host_;
  snapshot.timestamp_us = clock_.NowUs();
  if (sources_.ethtool == nullptr || ports_.empty()) return snapshot;
  snapshot.previous_us = std::exchange(last_read_us_, snapshot.timestamp_us);
  sources_.ethtool->BeginPoll(snapshot.timestamp_us);
  snapshot.nics.reserve(ports_.size());
  for (const Port& port : ports_) {
    if (port.netdev.empty()) continue;
    NicReading nic;
    if (auto status = sources_.ethtool->ReadInto(port.netdev, &nic); !status.ok()) {
      // The full poll counts the failure; the fast path only skips the port.
      LOG_DEBUG(kHostPollerLog, status.message());
      continue;
    }
    nic.device = port.device;
    nic.port = port.port;
    nic.netdev = port.netdev;
    nic.counters.EraseIf([](std::string_view name) { return !IsFastPathCounter(name); });
    nic.per_prio.EraseIf([](std::string_view name) { return !IsFastPathCounter(name); });
    snapshot.nics.push_back(std::move(nic));
  }
  return snapshot;
}

nlohmann::json SnapshotToJson(const HostSnapshot& snapshot) {
  nlohmann::json nics = nlohmann::json::array();
  for (const NicReading& nic : snapshot.nics) {
    nlohmann::json counters = nlohmann::json::object();
    for (const auto& [name, value] : nic.counters) counters[std::string(name)] = value;
    for (const auto& [name, by_prio] : nic.per_prio) {
      nlohmann::json prios = nlohmann::json::object();
      for (const auto& [prio, value] : by_prio) prios[std::to_string(prio)] = value;
      counters[std::string(name)] = std::move(prios);
    }
    if (nic.link_up) counters["link_up"] = *nic.link_up ? 1 : 0;
    if (nic.rate_bytes_per_second) counters["rate_bytes_per_second"] = *nic.rate_bytes_per_second;
    nics.push_back({{"device", nic.device},
                    {"port", nic.port},
                    {"netdev", nic.netdev.empty() ? nlohmann::json(nullptr) : nlohmann::json(nic.netdev)},
                    {"counters", std::move(counters)}});
  }
  return {{"host", snapshot.host},
          {"timestamp_us", snapshot.timestamp_us},
          {"nics", std::move(nics)},
          {"health",
           {{"skipped_values", snapshot.health.skipped_values},
            {"parse_errors", snapshot.health.parse_errors},
            {"source_errors", snapshot.health.source_errors}}}};
}

void AppendSnapshot(const HostSnapshot& snapshot, BatchBuilder* builder,
                    v1::TelemetryBatch* batch, bool fast) {
  for (const NicReading& nic : snapshot.nics) {
    const std::string name = StrCat(snapshot.host, "/", nic.device);
    v1::EntitySamples* entity =
        fast ? builder->AddFastEntity(batch, v1::SCOPE_NIC, name, nic.port, nic.netdev, snapshot.timestamp_us,
                                      snapshot.previous_us)
             : builder->AddEntity(batch, v1::SCOPE_NIC, name, nic.port, nic.netdev, snapshot.timestamp_us);
    nic.counters.ForEach([&](const CounterDef& def, uint64_t value) {
      builder->AddValue(entity, def, std::nullopt, std::nullopt, value);
    });
    nic.per_prio.ForEach([&](const CounterDef& def, const IndexedValues& by_prio) {
      for (const auto& [prio, value] : by_prio) builder->AddValue(entity, def, prio, std::nullopt, value);
    });
    static const CounterDef& link_up = *FindCounter(v1::SCOPE_NIC, "link_up");
    static const CounterDef& rate = *FindCounter(v1::SCOPE_NIC, "rate_bytes_per_second");
    if (nic.link_up) builder->AddValue(entity, link_up, std::nullopt, std::nullopt, *nic.link_up ? 1 : 0);
    if (nic.rate_bytes_per_second)
      builder->AddValue(entity, rate, std::nullopt, std::nullopt, *nic.rate_bytes_per_second);
    if (fast) DropIfUnmoved(batch);
  }
  if (fast) return;  // the full poll reports what the sources could not give
  auto* health = batch->mutable_health();
  health->set_skipped_values(health->skipped_values() + snapshot.health.skipped_values);
  health->set_parse_errors(health->parse_errors() + snapshot.health.parse_errors);
  health->set_source_errors(health->source_errors() + snapshot.health.source_errors);
}

namespace {
constexpr char kBootId[] = "sys/kernel/random/boot_id";
std::string BootIdOf(const absl::StatusOr<std::string>& text) {
  return text.ok() ? std::string(Trim(*text)) : "";
}
}  // namespace

std::string ReadHostBootId(const FsRoot& proc_root) { return BootIdOf(proc_root.ReadFile(kBootId)); }
std::string ReadHostBootId(FileCache& proc_files) { return BootIdOf(proc_files.ReadFile(kBootId)); }

}  // namespace rocefab::hostd
