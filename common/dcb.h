#pragma once
// A device's IEEE DCB settings through dcbnl (RTM_GETDCB, DCB_CMD_IEEE_GET):
// the priorities with PFC on and the DSCP APP table. Hosts read them for
// their RDMA netdevs, Linux switches for their ports.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

struct nlmsghdr;
struct nl_sock;

namespace rocefab {

// The PFC and APP parts of a DCB_CMD_IEEE_GET reply (its DCB_ATTR_IEEE
// nest). InvalidArgument when the message is no such reply.
struct DcbSettings {
  std::optional<uint8_t> pfc_en;
  std::map<uint32_t, uint32_t> dscp_to_prio;
};
absl::StatusOr<DcbSettings> ParseDcbIeeeReply(const nlmsghdr* reply);

// The eight priorities of a PFC enable mask (bit p is priority p): 1 on,
// 0 off, as the vocabulary's pfc_enabled gauge has them.
std::map<uint32_t, uint64_t> PfcEnabledByPriority(uint8_t mask);

class DcbSource {
 public:
  virtual ~DcbSource() = default;
  virtual absl::StatusOr<DcbSettings> Read(const std::string& netdev) = 0;
};

// One NETLINK_ROUTE socket for RTM_GETDCB. One thread at a time.
class NetlinkDcbSource final : public DcbSource {
 public:
  NetlinkDcbSource();
  ~NetlinkDcbSource() override;
  NetlinkDcbSource(const NetlinkDcbSource&) = delete;
  NetlinkDcbSource& operator=(const NetlinkDcbSource&) = delete;
  absl::StatusOr<DcbSettings> Read(const std::string& netdev) override;

 private:
  nl_sock* sock_ = nullptr;
};

}  // namespace rocefab
