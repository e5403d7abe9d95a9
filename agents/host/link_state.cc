#include "agents/host/link_state.h"

#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>

#include "common/strings.h"

namespace rocefab::hostd {

NetlinkLinkSource::NetlinkLinkSource() {
  sock_ = nl_socket_alloc();
  if (sock_ != nullptr && nl_connect(sock_, NETLINK_ROUTE) == 0) connected_ = true;
}

NetlinkLinkSource::~NetlinkLinkSource() {
  if (sock_ != nullptr) nl_socket_free(sock_);
}

absl::StatusOr<LinkState> NetlinkLinkSource::Read(const std::string& netdev) {
  if (!connected_) return absl::UnavailableError("netlink: cannot open a NETLINK_ROUTE socket");
  rtnl_link* link = nullptr;
  const int err = rtnl_link_get_kernel(sock_, 0, netdev.c_str(), &link);
  if (err < 0) {
    std::string message = StrCat("netlink: link ", netdev, ": ", nl_geterror(err));
    return err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV ? absl::NotFoundError(message)
                                                         : absl::UnavailableError(message);
  }
  LinkState state;
  state.carrier = rtnl_link_get_carrier(link) != 0;
  uint32_t changes = 0;
  if (rtnl_link_get_carrier_changes(link, &changes) == 0) {
    state.carrier_changes = changes;
    state.has_carrier_changes = true;
  }
  rtnl_link_put(link);
  return state;
}

}  // namespace rocefab::hostd
