#pragma once
// RDMA port counters through RDMA netlink (NETLINK_RDMA, the kernel's nldev
// client), as iproute2's `rdma statistic show` reads them:
//
//   RDMA_NLDEV_CMD_GET, dumped      each device's index and name
//   RDMA_NLDEV_CMD_STAT_GET         one port's hardware counters, one reply
//
// (drivers/infiniband/core/nldev.c: nldev_stat_get_doit, which without
// RDMA_NLDEV_ATTR_STAT_RES calls stat_get_doit_default_counter; Linux 5.3
// and later.) Attributes follow the netlink header directly, with no family
// header. The reply carries RDMA_NLDEV_ATTR_STAT_HWCOUNTERS, a nest of
// RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY nests, each a NUL-terminated
// ENTRY_NAME and a u64 ENTRY_VALUE. The names are those of sysfs
// ports/<N>/hw_counters/<name>: both come from the driver's rdma_hw_stats.
//
// Where sysfs takes one pread per counter file (about 30 per mlx5 port),
// this is one request and one reply per port. Unlike sysfs, which reuses a
// driver reading for the statistics' lifespan (10 ms by default), each
// request asks the driver again: one firmware query per port and poll.
// STAT_GET needs no privilege (no RDMA_NL_ADMIN_PERM), and in the kernel's
// default shared netns mode every device is visible from every namespace.

#include <linux/netlink.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

struct nl_sock;

namespace rocefab::hostd {

struct RdmaDevice {
  uint32_t index = 0;
  std::string name;
};

// (name, value) in the order the kernel sent them.
using RdmaCounters = std::vector<std::pair<std::string, uint64_t>>;

struct RdmaPortCounters {
  uint32_t device_index = 0;
  uint32_t port = 0;
  RdmaCounters counters;
};

// One reply message, header included, as the socket delivered it (its
// nlmsg_len within the bytes received). Exposed for tests and fuzzing.
absl::StatusOr<RdmaDevice> ParseRdmaDeviceReply(const nlmsghdr* reply);
absl::StatusOr<RdmaPortCounters> ParseRdmaStatReply(const nlmsghdr* reply);

// Where a port's hardware counters come from in one call.
class HwCounterSource {
 public:
  virtual ~HwCounterSource() = default;
  virtual bool available() const = 0;
  virtual absl::StatusOr<RdmaCounters> HwCounters(const std::string& device, uint32_t port) = 0;
};

class RdmaNetlinkSource final : public HwCounterSource {
 public:
  // Opens a NETLINK_RDMA socket. A kernel without the RDMA subsystem
  // refuses it (EPROTONOSUPPORT): available() is then false and
  // unavailable_reason() says why.
  RdmaNetlinkSource();
  ~RdmaNetlinkSource() override;
  RdmaNetlinkSource(const RdmaNetlinkSource&) = delete;
  RdmaNetlinkSource& operator=(const RdmaNetlinkSource&) = delete;

  bool available() const override { return sock_ != nullptr; }
  const std::string& unavailable_reason() const { return reason_; }

  // The hardware counters of `device`'s `port`. NotFound when the kernel
  // knows no such device (the device list is read again once, for a device
  // that appeared since); Unavailable when the kernel refuses the request
  // (a kernel before 5.3, a driver without counters, a port out of range).
  absl::StatusOr<RdmaCounters> HwCounters(const std::string& device, uint32_t port) override;

 private:
  absl::Status ReadDevices();
  absl::StatusOr<RdmaCounters> Stat(uint32_t index, uint32_t port);

  nl_sock* sock_ = nullptr;
  std::string reason_;
  std::unordered_map<std::string, uint32_t> index_;  // device name -> index
};

}  // namespace rocefab::hostd
