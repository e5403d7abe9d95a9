#include "agents/host/roce_settings.h"

#include <linux/dcbnl.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#include "common/strings.h"

namespace rocefab::hostd {
namespace {

// A small decimal setting; nullopt when absent, counted when garbage.
std::optional<uint64_t> ReadNumber(const FsRoot& sysfs, const std::string& path, ReadHealth* health) {
  if (!sysfs.Exists(path)) return std::nullopt;
  auto text = sysfs.ReadFile(path);
  if (!text.ok()) return std::nullopt;
  uint64_t value = 0;
  if (ParseSysfsCounter(*text, &value) != ValueParse::kOk) {
    ++health->parse_errors;
    return std::nullopt;
  }
  return value;
}

}  // namespace

RoceSettings ReadRoceFiles(const FsRoot& sysfs, const std::string& device, uint32_t port, const std::string& netdev,
                           ReadHealth* health) {
  RoceSettings s;
  s.roce_tos = ReadNumber(sysfs, StrCat("kernel/config/rdma_cm/", device, "/ports/", port, "/default_roce_tos"), health);
  if (!netdev.empty()) {
    const std::string net = StrCat("class/net/", netdev);
    s.mtu_bytes = ReadNumber(sysfs, StrCat(net, "/mtu"), health);
    for (uint32_t prio = 0; prio < 8; ++prio) {
      if (auto v = ReadNumber(sysfs, StrCat(net, "/ecn/roce_rp/enable/", prio), health)) s.ecn_rp_enabled[prio] = *v != 0;
      if (auto v = ReadNumber(sysfs, StrCat(net, "/ecn/roce_np/enable/", prio), health)) s.ecn_np_enabled[prio] = *v != 0;
    }
    s.cnp_dscp = ReadNumber(sysfs, StrCat(net, "/ecn/roce_np/cnp_dscp"), health);
    s.cnp_prio = ReadNumber(sysfs, StrCat(net, "/ecn/roce_np/cnp_802p_prio"), health);
  }
  if (!s.cnp_dscp || !s.cnp_prio) {
    // Upstream: debugfs per PCI function. Every function's directory is
    // named by its PCI address; the RDMA device's `device` link names it.
    const std::string device_dir = sysfs.Resolve(StrCat("class/infiniband/", device, "/device"));
    char target[4096];
    const ssize_t n = ::readlink(device_dir.c_str(), target, sizeof target - 1);
    if (n > 0) {
      std::string pci(target, static_cast<size_t>(n));
      pci = pci.substr(pci.rfind('/') + 1);
      const std::string cc = StrCat("kernel/debug/mlx5/", pci, "/cc_params/");
      if (!s.cnp_dscp) s.cnp_dscp = ReadNumber(sysfs, cc + "np_cnp_dscp", health);
      if (!s.cnp_prio) s.cnp_prio = ReadNumber(sysfs, cc + "np_cnp_prio", health);
    }
  }
  return s;
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

void MergeDcb(const DcbSettings& dcb, RoceSettings* settings) {
  if (dcb.pfc_en)
    for (uint32_t prio = 0; prio < 8; ++prio) settings->pfc_enabled[prio] = (*dcb.pfc_en >> prio) & 1;
  settings->dscp_to_prio = dcb.dscp_to_prio;
  settings->dscp_trust = dcb.dscp_to_prio.empty() ? 0 : 1;
}

void AddRoceSettings(const RoceSettings& s, NicReading* nic) {
  auto put = [&](const char* name, const std::optional<uint64_t>& v) {
    if (v) nic->counters[name] = *v;
  };
  put("mtu_bytes", s.mtu_bytes);
  put("roce_tos", s.roce_tos);
  put("cnp_dscp", s.cnp_dscp);
  put("cnp_prio", s.cnp_prio);
  put("dscp_trust", s.dscp_trust);
  if (s.roce_tos)
    if (auto it = s.dscp_to_prio.find(static_cast<uint32_t>(*s.roce_tos >> 2)); it != s.dscp_to_prio.end())
      nic->counters["roce_prio"] = it->second;
  for (const auto& [prio, v] : s.ecn_rp_enabled) nic->per_prio["roce_ecn_rp_enabled"][prio] = v;
  for (const auto& [prio, v] : s.ecn_np_enabled) nic->per_prio["roce_ecn_np_enabled"][prio] = v;
  for (const auto& [prio, v] : s.pfc_enabled) nic->per_prio["pfc_enabled"][prio] = v;
}

}  // namespace rocefab::hostd
