#pragma once
// The `linux` backend: a switch whose data plane is the Linux kernel (a
// white-box switch running its NOS on Linux, or a network namespace in
// tests). Config goes in through rtnetlink: interface addresses and policy
// rules through libnl-route objects; nexthop objects, nexthop groups and
// routes that use them (nhid) through libnl messages, as libnl has no
// nexthop object; the multipath hash through the netns's sysctls; QoS item
// by item through dcbnl and a RED qdisc (linux_qos.h), each `unsupported`
// with its reason where the device or kernel lacks it. Ports are interfaces
// of the same name (Ethernet0 ...).
//
// Counters come from the kernel's link statistics (rtnetlink), and each
// port's PFC priorities (pfc_enabled) from dcbnl where the port has DCB.
//
// The counter half (the poll thread) and the config half (the gRPC threads,
// which the ConfigApplier serializes) each have their own netlink socket: a
// libnl socket is not safe from two threads, and their requests and replies
// would interleave.

#include <map>
#include <memory>
#include <string>

#include "agents/switch/config_backend.h"
#include "agents/switch/linux_qos.h"
#include "agents/switch/switch_backend.h"
#include "common/dcb.h"

struct nl_sock;
struct nl_msg;

namespace rocefab::switchd {

class LinuxBackend final : public ConfigBackend, public SwitchBackend {
 public:
  LinuxBackend(std::string switch_name, std::string proc_sys_root = "/proc/sys");
  ~LinuxBackend() override;
  LinuxBackend(const LinuxBackend&) = delete;
  LinuxBackend& operator=(const LinuxBackend&) = delete;

  // ConfigBackend.
  std::string name() const override { return "linux"; }
  absl::Status Install(const v1::ConfigItem& item) override;
  absl::Status Remove(const v1::ConfigItem& item) override;
  absl::Status Commit(const v1::SwitchConfig& applied) override;

  // SwitchBackend: link counters of the Ethernet* interfaces.
  absl::StatusOr<SwitchReading> ReadCounters() override;

 private:
  absl::StatusOr<int> IfIndex(const std::string& port);
  absl::Status Send(::nl_msg* msg, const std::string& what);
  absl::Status InstallAddress(const v1::AddressItem& item, bool remove);
  absl::Status InstallGroup(const v1::NexthopGroupItem& group, bool remove);
  absl::Status InstallRoute(const v1::RouteItem& route, bool remove);
  absl::Status InstallRule(const v1::RuleItem& rule, bool remove);
  absl::Status InstallHash(const v1::HashItem& hash);

  std::string switch_name_;
  std::string proc_sys_;
  nl_sock* sock_ = nullptr;           // config: Install, Remove
  nl_sock* counters_sock_ = nullptr;  // ReadCounters
  std::map<uint32_t, uint32_t> group_members_;  // group id -> member count installed
  LinuxQos qos_{nullptr};                        // on sock_
  std::unique_ptr<DcbSource> dcb_;               // ReadCounters: its own socket
};

// Adds pfc_enabled{prio} to each port of `reading` whose dcbnl IEEE settings
// `dcb` answers with a PFC part; ports without DCB get nothing.
void AddPfcEnabled(DcbSource& dcb, SwitchReading* reading);

}  // namespace rocefab::switchd
