#include "agents/switch/linux_qos.h"

#include <linux/dcbnl.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/attr.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "common/strings.h"

namespace rocefab::switchd {
namespace {

// The part of a QoS item's key: "qos/pfc" -> "pfc".
std::string Part(const v1::ConfigItem& item) {
  const std::string& key = item.key();
  return key.starts_with("qos/") ? key.substr(4) : key;
}

struct DcbReply {
  bool got = false;
  int ieee_status = 0;  // DCB_ATTR_IEEE in a SET reply: 0 or the driver's error
};

int OnDcbReply(nl_msg* msg, void* arg) {
  auto* reply = static_cast<DcbReply*>(arg);
  nlattr* tb[DCB_ATTR_MAX + 1] = {};
  if (nlmsg_parse(nlmsg_hdr(msg), sizeof(dcbmsg), tb, DCB_ATTR_MAX, nullptr) < 0) return NL_SKIP;
  reply->got = true;
  if (tb[DCB_ATTR_IEEE] != nullptr && nla_len(tb[DCB_ATTR_IEEE]) == 1)
    reply->ieee_status = static_cast<int8_t>(nla_get_u8(tb[DCB_ATTR_IEEE]));
  return NL_OK;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> LinuxQos::Ports() {
  if (sock_ == nullptr) return absl::UnavailableError("no netlink socket");
  nl_cache* cache = nullptr;
  if (int err = rtnl_link_alloc_cache(sock_, AF_UNSPEC, &cache); err < 0)
    return absl::UnavailableError(StrCat("cannot list interfaces: ", nl_geterror(err)));
  std::vector<std::string> ports;
  for (nl_object* obj = nl_cache_get_first(cache); obj != nullptr; obj = nl_cache_get_next(obj)) {
    const std::string name = rtnl_link_get_name(reinterpret_cast<rtnl_link*>(obj));
    if (name.starts_with("Ethernet")) ports.push_back(name);
  }
  nl_cache_free(cache);
  std::sort(ports.begin(), ports.end());
  return ports;
}

namespace {

// One dcbnl request on `port`: `fill` adds the command's attributes. The
// kernel answers an unsupported device with EOPNOTSUPP (as NLMSG_ERROR), and
// a failed IEEE SET with an error code in DCB_ATTR_IEEE.
absl::Status DcbRequest(nl_sock* sock, uint8_t cmd, const std::string& port, const std::function<bool(nl_msg*)>& fill,
                        const std::string& what) {
  if (sock == nullptr) return absl::UnavailableError("no netlink socket");
  nl_msg* msg = nlmsg_alloc_simple(cmd == DCB_CMD_IEEE_GET ? RTM_GETDCB : RTM_SETDCB, NLM_F_REQUEST);
  if (msg == nullptr) return absl::ResourceExhaustedError("nlmsg_alloc");
  dcbmsg header{};
  header.dcb_family = AF_UNSPEC;
  header.cmd = cmd;
  if (nlmsg_append(msg, &header, sizeof(header), NLMSG_ALIGNTO) < 0 ||
      nla_put_string(msg, DCB_ATTR_IFNAME, port.c_str()) < 0 || !fill(msg)) {
    nlmsg_free(msg);
    return absl::InternalError(StrCat(what, " on ", port, ": message too long"));
  }
  DcbReply reply;
  nl_cb* cb = nl_cb_alloc(NL_CB_DEFAULT);
  nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, OnDcbReply, &reply);
  int err = nl_send_auto(sock, msg);
  nlmsg_free(msg);
  if (err >= 0) err = nl_recvmsgs(sock, cb);
  // The ACK that follows the reply.
  if (err >= 0 && reply.got) err = nl_wait_for_ack(sock);
  nl_cb_put(cb);
  if (err == -NLE_OPNOTSUPP || err == -NLE_NODEV)
    return absl::UnimplementedError(StrCat(port, " has no DCB (dcbnl ", what, ": ", nl_geterror(err), ")"));
  if (err < 0) return absl::InternalError(StrCat("dcbnl ", what, " on ", port, ": ", nl_geterror(err)));
  if (reply.ieee_status != 0)
    return absl::UnimplementedError(
        StrCat(port, "'s driver refused dcbnl ", what, ": ", std::strerror(std::abs(reply.ieee_status))));
  return absl::OkStatus();
}

}  // namespace

absl::Status LinuxQos::ProbeDcb(const std::string& port) {
  return DcbRequest(sock_, DCB_CMD_IEEE_GET, port, [](nl_msg*) { return true; }, "IEEE get");
}

absl::Status LinuxQos::SetPfc(const std::string& port, uint8_t enabled_mask) {
  return DcbRequest(
      sock_, DCB_CMD_IEEE_SET, port,
      [&](nl_msg* msg) {
        nlattr* ieee = nla_nest_start(msg, DCB_ATTR_IEEE);
        ieee_pfc pfc{};
        pfc.pfc_en = enabled_mask;
        if (ieee == nullptr || nla_put(msg, DCB_ATTR_IEEE_PFC, sizeof(pfc), &pfc) < 0) return false;
        nla_nest_end(msg, ieee);
        return true;
      },
      "IEEE PFC set");
}

absl::Status LinuxQos::SetEts(const std::string& port, uint32_t strict_tc) {
  return DcbRequest(
      sock_, DCB_CMD_IEEE_SET, port,
      [&](nl_msg* msg) {
        ieee_ets ets{};
        const bool strict = strict_tc != 0 && strict_tc < IEEE_8021QAZ_MAX_TCS;
        const int shared = IEEE_8021QAZ_MAX_TCS - (strict ? 1 : 0);
        int left = 100;
        for (uint32_t tc = 0; tc < IEEE_8021QAZ_MAX_TCS; ++tc) {
          ets.prio_tc[tc] = static_cast<uint8_t>(tc);  // priority n in class n
          if (strict && tc == strict_tc) {
            ets.tc_tsa[tc] = IEEE_8021QAZ_TSA_STRICT;
            continue;
          }
          ets.tc_tsa[tc] = IEEE_8021QAZ_TSA_ETS;
          ets.tc_tx_bw[tc] = static_cast<uint8_t>(100 / shared);
          left -= 100 / shared;
        }
        // The shares must add up to 100: the remainder goes to class 0,
        // which is never the strict one (strict_tc 0 means none).
        ets.tc_tx_bw[0] += static_cast<uint8_t>(left);
        nlattr* ieee = nla_nest_start(msg, DCB_ATTR_IEEE);
        if (ieee == nullptr || nla_put(msg, DCB_ATTR_IEEE_ETS, sizeof(ets), &ets) < 0) return false;
        nla_nest_end(msg, ieee);
        return true;
      },
      "IEEE ETS set");
}

absl::Status LinuxQos::SetDscp(const std::string& port, const v1::QosPolicy& qos, bool remove) {
  return DcbRequest(
      sock_, remove ? DCB_CMD_IEEE_DEL : DCB_CMD_IEEE_SET, port,
      [&](nl_msg* msg) {
        nlattr* ieee = nla_nest_start(msg, DCB_ATTR_IEEE);
        nlattr* table = ieee ? nla_nest_start(msg, DCB_ATTR_IEEE_APP_TABLE) : nullptr;
        if (table == nullptr) return false;
        for (const auto& map : qos.dscp_to_tc()) {
          dcb_app app{};
          app.selector = IEEE_8021QAZ_APP_SEL_DSCP;
          app.priority = static_cast<uint8_t>(map.tc());
          app.protocol = static_cast<uint16_t>(map.dscp());
          if (nla_put(msg, DCB_ATTR_IEEE_APP, sizeof(app), &app) < 0) return false;
        }
        nla_nest_end(msg, table);
        nla_nest_end(msg, ieee);
        return true;
      },
      remove ? "IEEE APP delete" : "IEEE APP set");
}

absl::Status LinuxQos::SetRed(const std::string& port, const v1::EcnSettings& ecn) {
  const unsigned ifindex = if_nametoindex(port.c_str());
  if (ifindex == 0) return absl::FailedPreconditionError(StrCat("no interface ", port));
  nl_msg* msg = nlmsg_alloc_simple(RTM_NEWQDISC, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE);
  if (msg == nullptr) return absl::ResourceExhaustedError("nlmsg_alloc");
  tcmsg tc{};
  tc.tcm_family = AF_UNSPEC;
  tc.tcm_ifindex = static_cast<int>(ifindex);
  tc.tcm_parent = TC_H_ROOT;
  // RED as sch_red takes it (the values tc(8)'s red computes): thresholds on
  // the averaged queue in bytes, EWMA weight 2^-9, Pmax both as the Plog
  // approximation and exactly as TCA_RED_MAX_P, no idle damping.
  tc_red_qopt opt{};
  const double kmin = static_cast<double>(ecn.min_bytes()), kmax = static_cast<double>(ecn.max_bytes());
  opt.qth_min = static_cast<uint32_t>(kmin);
  opt.qth_max = static_cast<uint32_t>(std::max(kmax, kmin + 1));
  opt.limit = static_cast<uint32_t>(std::min(4.0 * kmax, 4e9));
  opt.Wlog = 9;
  double p = (ecn.probability() > 0 ? ecn.probability() : 0.1) / std::max(1.0, kmax - kmin);
  int plog = 0;
  while (plog < 31 && p <= 1.0) {
    p *= 2;
    ++plog;
  }
  opt.Plog = static_cast<unsigned char>(plog);
  opt.Scell_log = 0;
  opt.flags = TC_RED_ECN;
  uint8_t stab[256] = {};
  const uint32_t max_p = static_cast<uint32_t>(std::min(4294967295.0, std::ldexp(ecn.probability(), 32)));
  nlattr* options = nullptr;
  const bool built = nlmsg_append(msg, &tc, sizeof(tc), NLMSG_ALIGNTO) >= 0 &&
                     nla_put_string(msg, TCA_KIND, "red") >= 0 &&
                     (options = nla_nest_start(msg, TCA_OPTIONS)) != nullptr &&
                     nla_put(msg, TCA_RED_PARMS, sizeof(opt), &opt) >= 0 &&
                     nla_put(msg, TCA_RED_STAB, sizeof(stab), stab) >= 0 &&
                     nla_put_u32(msg, TCA_RED_MAX_P, max_p) >= 0;
  if (!built) {
    nlmsg_free(msg);
    return absl::InternalError("RED qdisc: message too long");
  }
  nla_nest_end(msg, options);
  const int err = nl_send_sync(sock_, msg);  // frees msg
  // A kernel without sch_red (and no module to load) has no such kind.
  if (err == -NLE_OBJ_NOTFOUND || err == -NLE_OPNOTSUPP || err == -NLE_NOATTR)
    return absl::UnimplementedError(
        StrCat("the kernel has no RED qdisc (sch_red) for ECN marking on ", port, ": ", nl_geterror(err)));
  if (err < 0) return absl::InternalError(StrCat("RED qdisc on ", port, ": ", nl_geterror(err)));
  return absl::OkStatus();
}

absl::Status LinuxQos::RemoveRoot(const std::string& port) {
  const unsigned ifindex = if_nametoindex(port.c_str());
  if (ifindex == 0) return absl::OkStatus();
  nl_msg* msg = nlmsg_alloc_simple(RTM_DELQDISC, NLM_F_REQUEST);
  if (msg == nullptr) return absl::ResourceExhaustedError("nlmsg_alloc");
  tcmsg tc{};
  tc.tcm_family = AF_UNSPEC;
  tc.tcm_ifindex = static_cast<int>(ifindex);
  tc.tcm_parent = TC_H_ROOT;
  if (nlmsg_append(msg, &tc, sizeof(tc), NLMSG_ALIGNTO) < 0) {
    nlmsg_free(msg);
    return absl::InternalError("qdisc delete: message too long");
  }
  const int err = nl_send_sync(sock_, msg);
  // Gone already, or the default one left (the kernel refuses to delete it).
  if (err < 0 && err != -NLE_OBJ_NOTFOUND && err != -NLE_INVAL && err != -NLE_NOADDR)
    return absl::InternalError(StrCat("qdisc delete on ", port, ": ", nl_geterror(err)));
  return absl::OkStatus();
}

absl::Status LinuxQos::OnEveryPort(const std::string& what, bool needs_dcb,
                                   const std::function<absl::Status(const std::string&)>& apply) {
  auto ports = Ports();
  if (!ports.ok()) return ports.status();
  if (ports->empty()) return absl::FailedPreconditionError(StrCat(what, ": no Ethernet* interfaces"));
  if (needs_dcb) {
    // Ask every port before changing any: one without DCB makes the item
    // unsupported on this switch, and nothing is half-applied.
    std::vector<std::string> missing;
    std::string reason;
    for (const std::string& port : *ports) {
      absl::Status probe = ProbeDcb(port);
      if (absl::IsUnimplemented(probe)) {
        missing.push_back(port);
        if (reason.empty()) reason = std::string(probe.message());
      } else if (!probe.ok()) {
        return probe;
      }
    }
    if (!missing.empty())
      return absl::UnimplementedError(StrCat(what, " needs DCB, and ", missing.size(), " of ", ports->size(),
                                             " ports have none: ", reason));
  }
  for (const std::string& port : *ports)
    if (absl::Status status = apply(port); !status.ok()) return status;
  return absl::OkStatus();
}

absl::Status LinuxQos::Install(const v1::ConfigItem& item) {
  const v1::QosPolicy& qos = item.qos().qos();
  const std::string part = Part(item);
  if (part == "pfc") {
    uint8_t mask = 0;
    for (uint32_t prio : qos.pfc_priorities())
      if (prio < 8) mask |= static_cast<uint8_t>(1u << prio);
    return OnEveryPort("PFC", true, [&](const std::string& port) { return SetPfc(port, mask); });
  }
  if (part == "ets")
    return OnEveryPort("ETS", true, [&](const std::string& port) { return SetEts(port, qos.strict_priority_tc()); });
  if (part == "dscp")
    return OnEveryPort("the DSCP map (dcbnl APP table)", true,
                       [&](const std::string& port) { return SetDscp(port, qos, false); });
  if (part == "ecn") {
    if (qos.ecn().empty()) return absl::OkStatus();
    // One root RED per port holds one class's thresholds: the first the
    // policy lists (the RoCE class in the shipped policies). Per-class RED
    // under mqprio needs a multi-queue device.
    return OnEveryPort("ECN", false, [&](const std::string& port) { return SetRed(port, qos.ecn(0)); });
  }
  if (part == "pfc_watchdog")
    return absl::UnimplementedError(
        "Linux has no PFC watchdog; on hosts, the NIC's pause-storm prevention (ethtool --set-tunable "
        "pfc-prevention-tout) is the nearest thing");
  if (part == "buffer")
    return absl::UnimplementedError("the linux backend does not program shared-buffer profiles (devlink sb)");
  return absl::UnimplementedError(StrCat("unknown QoS item ", item.key()));
}

absl::Status LinuxQos::Remove(const v1::ConfigItem& item) {
  absl::Status status = RemoveItem(item);
  // What the device could not take was never on it.
  return absl::IsUnimplemented(status) ? absl::OkStatus() : status;
}

absl::Status LinuxQos::RemoveItem(const v1::ConfigItem& item) {
  const std::string part = Part(item);
  if (part == "pfc") return OnEveryPort("PFC", true, [&](const std::string& port) { return SetPfc(port, 0); });
  if (part == "dscp")
    return OnEveryPort("the DSCP map", true,
                       [&](const std::string& port) { return SetDscp(port, item.qos().qos(), true); });
  if (part == "ecn") return OnEveryPort("ECN", false, [&](const std::string& port) { return RemoveRoot(port); });
  // ETS stays as set; the device has no "unset", and the next policy sets it.
  return absl::OkStatus();
}

}  // namespace rocefab::switchd
