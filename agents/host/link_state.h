#pragma once
// Link carrier and flap count of an Ethernet device, through rtnetlink
// (libnl-route): IFLA_CARRIER and IFLA_CARRIER_CHANGES.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

struct nl_sock;

namespace rocefab::hostd {

struct LinkState {
  bool carrier = false;
  uint32_t carrier_changes = 0;  // up and down transitions since the device appeared
  bool has_carrier_changes = false;
};

class LinkStateSource {
 public:
  virtual ~LinkStateSource() = default;
  virtual absl::StatusOr<LinkState> Read(const std::string& netdev) = 0;
};

// Owns one NETLINK_ROUTE socket. One thread at a time.
class NetlinkLinkSource final : public LinkStateSource {
 public:
  NetlinkLinkSource();
  ~NetlinkLinkSource() override;
  NetlinkLinkSource(const NetlinkLinkSource&) = delete;
  NetlinkLinkSource& operator=(const NetlinkLinkSource&) = delete;

  absl::StatusOr<LinkState> Read(const std::string& netdev) override;

 private:
  nl_sock* sock_ = nullptr;
  bool connected_ = false;
};

}  // namespace rocefab::hostd
