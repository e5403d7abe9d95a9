// The RoCE settings reader over an mlx5 host's layouts, built file by file
// as the kernel and the driver lay them out (agents/host/roce_settings.h),
// and the dcbnl IEEE reply parser over a message built as the kernel's
// dcbnl_ieee_fill() nests it.
#include "agents/host/roce_settings.h"

#include <gtest/gtest.h>
#include <linux/dcbnl.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/support/test_support.h"

namespace rocefab::hostd {
namespace {

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// mlx5_0 (eth2) on a MLNX_OFED host: the ecn/ tree, rdma_cm's configfs
// ToS. mlx5_1 (eth3) on an upstream kernel: no ecn/ tree; the CNP settings
// in debugfs under its PCI function, which the `device` link names.
struct Mlx5Host {
  testing::TempDir dir;
  std::string sys = dir / "sys";
  Mlx5Host() {
    Write(sys + "/class/net/eth2/mtu", "4200\n");
    Write(sys + "/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos", "106\n");  // DSCP 26, ECT(0)
    for (int prio = 0; prio < 8; ++prio) {
      Write(sys + "/class/net/eth2/ecn/roce_rp/enable/" + std::to_string(prio), prio == 3 ? "1\n" : "0\n");
      Write(sys + "/class/net/eth2/ecn/roce_np/enable/" + std::to_string(prio), prio == 3 ? "1\n" : "0\n");
    }
    Write(sys + "/class/net/eth2/ecn/roce_np/cnp_dscp", "48\n");
    Write(sys + "/class/net/eth2/ecn/roce_np/cnp_802p_prio", "6\n");
    Write(sys + "/class/net/eth3/mtu", "9000\n");
    const std::string pci = sys + "/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1";
    std::filesystem::create_directories(pci);
    std::filesystem::create_directories(sys + "/class/infiniband/mlx5_1");
    std::filesystem::create_directory_symlink("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1",
                                              sys + "/class/infiniband/mlx5_1/device");
    Write(sys + "/kernel/debug/mlx5/0000:3b:00.1/cc_params/np_cnp_dscp", "46\n");
    Write(sys + "/kernel/debug/mlx5/0000:3b:00.1/cc_params/np_cnp_prio", "5\n");
  }
};

TEST(RoceSettings, OfedEcnTreeAndConfigfsTos) {
  Mlx5Host host;
  FsRoot root(host.sys);
  ReadHealth health;
  const RoceSettings s = ReadRoceFiles(root, "mlx5_0", 1, "eth2", &health);
  EXPECT_EQ(s.mtu_bytes, 4200u);
  EXPECT_EQ(s.roce_tos, 106u);
  EXPECT_EQ(s.cnp_dscp, 48u);
  EXPECT_EQ(s.cnp_prio, 6u);
  ASSERT_EQ(s.ecn_np_enabled.size(), 8u);
  EXPECT_EQ(s.ecn_np_enabled.at(3), 1u);
  EXPECT_EQ(s.ecn_rp_enabled.at(2), 0u);
  EXPECT_EQ(health.parse_errors, 0u);
}

TEST(RoceSettings, UpstreamDebugfsByPciFunctionAndNothingInventedWhenAbsent) {
  Mlx5Host host;
  FsRoot root(host.sys);
  ReadHealth health;
  const RoceSettings s = ReadRoceFiles(root, "mlx5_1", 1, "eth3", &health);
  EXPECT_EQ(s.mtu_bytes, 9000u);
  EXPECT_EQ(s.cnp_dscp, 46u);
  EXPECT_EQ(s.cnp_prio, 5u);
  EXPECT_FALSE(s.roce_tos.has_value()) << "no configfs directory: unknown, not 0";
  EXPECT_TRUE(s.ecn_np_enabled.empty());
  EXPECT_EQ(health.skipped_values + health.parse_errors, 0u) << "absent settings are normal";
  // Garbage is counted and left out.
  Write(host.sys + "/class/net/eth3/mtu", "nine thousand\n");
  const RoceSettings bad = ReadRoceFiles(root, "mlx5_1", 1, "eth3", &health);
  EXPECT_FALSE(bad.mtu_bytes.has_value());
  EXPECT_EQ(health.parse_errors, 1u);
}

// A DCB_CMD_IEEE_GET reply: dcbmsg, DCB_ATTR_IFNAME, then the DCB_ATTR_IEEE
// nest with DCB_ATTR_IEEE_PFC (struct ieee_pfc) and DCB_ATTR_IEEE_APP_TABLE
// (DCB_ATTR_IEEE_APP entries, struct dcb_app).
nl_msg* IeeeReply(uint8_t pfc_en, const std::vector<dcb_app>& apps, bool with_pfc = true) {
  nl_msg* msg = nlmsg_alloc_simple(RTM_GETDCB, 0);
  dcbmsg header{};
  header.dcb_family = AF_UNSPEC;
  header.cmd = DCB_CMD_IEEE_GET;
  nlmsg_append(msg, &header, sizeof header, NLMSG_ALIGNTO);
  nla_put_string(msg, DCB_ATTR_IFNAME, "eth2");
  nlattr* ieee = nla_nest_start(msg, DCB_ATTR_IEEE);
  if (with_pfc) {
    ieee_pfc pfc{};
    pfc.pfc_en = pfc_en;
    nla_put(msg, DCB_ATTR_IEEE_PFC, sizeof pfc, &pfc);
  }
  nlattr* table = nla_nest_start(msg, DCB_ATTR_IEEE_APP_TABLE);
  for (const dcb_app& app : apps) nla_put(msg, DCB_ATTR_IEEE_APP, sizeof app, &app);
  nla_nest_end(msg, table);
  nla_nest_end(msg, ieee);
  return msg;
}

TEST(ParseDcbIeeeReply, PfcBitmapAndTheDscpEntriesOfTheAppTable) {
  nl_msg* msg = IeeeReply(0x08, {{IEEE_8021QAZ_APP_SEL_DSCP, 3, 26},
                                 {IEEE_8021QAZ_APP_SEL_DSCP, 6, 48},
                                 {IEEE_8021QAZ_APP_SEL_ETHERTYPE, 4, 0x8915}});
  auto dcb = ParseDcbIeeeReply(nlmsg_hdr(msg));
  nlmsg_free(msg);
  ASSERT_TRUE(dcb.ok()) << dcb.status();
  EXPECT_EQ(dcb->pfc_en, 0x08);
  EXPECT_EQ(dcb->dscp_to_prio, (std::map<uint32_t, uint32_t>{{26, 3}, {48, 6}})) << "only DSCP entries";
  RoceSettings s;
  s.roce_tos = 106;
  MergeDcb(*dcb, &s);
  NicReading nic;
  AddRoceSettings(s, &nic);
  EXPECT_EQ(nic.per_prio.at("pfc_enabled").at(3), 1u);
  EXPECT_EQ(nic.per_prio.at("pfc_enabled").at(4), 0u);
  EXPECT_EQ(nic.counters.at("dscp_trust"), 1u);
  EXPECT_EQ(nic.counters.at("roce_prio"), 3u) << "DSCP 26 (ToS 106) maps to priority 3";
}

TEST(ParseDcbIeeeReply, RejectsWhatIsNoIeeeReplyAndToleratesAMissingPfc) {
  nl_msg* other = nlmsg_alloc_simple(RTM_GETLINK, 0);
  EXPECT_FALSE(ParseDcbIeeeReply(nlmsg_hdr(other)).ok());
  nlmsg_free(other);
  EXPECT_FALSE(ParseDcbIeeeReply(nullptr).ok());
  nl_msg* no_pfc = IeeeReply(0, {}, /*with_pfc=*/false);
  auto dcb = ParseDcbIeeeReply(nlmsg_hdr(no_pfc));
  nlmsg_free(no_pfc);
  ASSERT_TRUE(dcb.ok());
  EXPECT_FALSE(dcb->pfc_en.has_value());
  RoceSettings s;
  MergeDcb(*dcb, &s);
  EXPECT_TRUE(s.pfc_enabled.empty()) << "unknown, not all off";
  EXPECT_EQ(s.dscp_trust, 0u) << "an empty APP table: the NIC trusts PCP";
}

}  // namespace
}  // namespace rocefab::hostd
