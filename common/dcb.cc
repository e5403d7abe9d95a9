#include "common/dcb.h"

#include <linux/dcbnl.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#include <cstring>

#include "common/strings.h"

namespace rocefab {

std::map<uint32_t, uint64_t> PfcEnabledByPriority(uint8_t mask) {
  std::map<uint32_t, uint64_t> enabled;
  for (uint32_t prio = 0; prio < 8; ++prio) enabled[prio] = (mask >> prio) & 1;
  return enabled;
}

absl::StatusOr<DcbSettings> ParseDcbIeeeReply(const nlmsghdr* reply) {
  if (reply == nullptr || reply->nlmsg_type != RTM_GETDCB ||
      reply->nlmsg_len < NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(dcbmsg)))
    return absl::InvalidArgumentError("not an RTM_GETDCB reply");
  const auto* header = static_cast<const dcbmsg*>(nlmsg_data(reply));
  if (header->cmd != DCB_CMD_IEEE_GET) return absl::InvalidArgumentError("not a DCB_CMD_IEEE_GET reply");
  nlattr* tb[DCB_ATTR_MAX + 1] = {};
  if (nlmsg_parse(const_cast<nlmsghdr*>(reply), sizeof(dcbmsg), tb, DCB_ATTR_MAX, nullptr) < 0)
    return absl::InvalidArgumentError("malformed dcbnl attributes");
  DcbSettings out;
  if (tb[DCB_ATTR_IEEE] == nullptr) return out;  // the device answers no IEEE DCB
  nlattr* ieee[DCB_ATTR_IEEE_MAX + 1] = {};
  if (nla_parse_nested(ieee, DCB_ATTR_IEEE_MAX, tb[DCB_ATTR_IEEE], nullptr) < 0)
    return absl::InvalidArgumentError("malformed DCB_ATTR_IEEE");
  if (ieee[DCB_ATTR_IEEE_PFC] != nullptr) {
    if (nla_len(ieee[DCB_ATTR_IEEE_PFC]) < static_cast<int>(sizeof(ieee_pfc)))
      return absl::InvalidArgumentError("DCB_ATTR_IEEE_PFC is shorter than struct ieee_pfc");
    ieee_pfc pfc;
    std::memcpy(&pfc, nla_data(ieee[DCB_ATTR_IEEE_PFC]), sizeof pfc);
    out.pfc_en = pfc.pfc_en;
  }
  if (ieee[DCB_ATTR_IEEE_APP_TABLE] != nullptr) {
    nlattr* app;
    int rem;
    nla_for_each_nested(app, ieee[DCB_ATTR_IEEE_APP_TABLE], rem) {
      if (nla_type(app) != DCB_ATTR_IEEE_APP || nla_len(app) < static_cast<int>(sizeof(dcb_app))) continue;
      dcb_app entry;
      std::memcpy(&entry, nla_data(app), sizeof entry);
      if (entry.selector == IEEE_8021QAZ_APP_SEL_DSCP && entry.protocol < 64 && entry.priority < 8)
        out.dscp_to_prio[entry.protocol] = entry.priority;
    }
  }
  return out;
}

namespace {

int OnDcbReply(nl_msg* msg, void* arg) {
  auto* out = static_cast<absl::StatusOr<DcbSettings>*>(arg);
  *out = ParseDcbIeeeReply(nlmsg_hdr(msg));
  return NL_OK;
}

}  // namespace

NetlinkDcbSource::NetlinkDcbSource() {
  sock_ = nl_socket_alloc();
  if (sock_ != nullptr && nl_connect(sock_, NETLINK_ROUTE) < 0) {
    nl_socket_free(sock_);
    sock_ = nullptr;
  }
}

NetlinkDcbSource::~NetlinkDcbSource() {
  if (sock_ != nullptr) nl_socket_free(sock_);
}

absl::StatusOr<DcbSettings> NetlinkDcbSource::Read(const std::string& netdev) {
  if (sock_ == nullptr) return absl::UnavailableError("no NETLINK_ROUTE socket");
  nl_msg* msg = nlmsg_alloc_simple(RTM_GETDCB, NLM_F_REQUEST);
  if (msg == nullptr) return absl::ResourceExhaustedError("nlmsg_alloc");
  dcbmsg header{};
  header.dcb_family = AF_UNSPEC;
  header.cmd = DCB_CMD_IEEE_GET;
  if (nlmsg_append(msg, &header, sizeof(header), NLMSG_ALIGNTO) < 0 ||
      nla_put_string(msg, DCB_ATTR_IFNAME, netdev.c_str()) < 0) {
    nlmsg_free(msg);
    return absl::InternalError("building the dcbnl request");
  }
  absl::StatusOr<DcbSettings> result = absl::UnavailableError(StrCat(netdev, ": no dcbnl reply"));
  nl_socket_modify_cb(sock_, NL_CB_VALID, NL_CB_CUSTOM, OnDcbReply, &result);
  int err = nl_send_auto(sock_, msg);
  nlmsg_free(msg);
  if (err >= 0) err = nl_recvmsgs_default(sock_);
  if (err < 0)
    return absl::UnavailableError(StrCat(netdev, ": dcbnl IEEE get: ", nl_geterror(err),
                                         " (no DCB on this device or driver)"));
  return result;
}

}  // namespace rocefab
