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

void MergeDcb(const DcbSettings& dcb, RoceSettings* settings) {
  if (dcb.pfc_en) settings->pfc_enabled = PfcEnabledByPriority(*dcb.pfc_en);
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
