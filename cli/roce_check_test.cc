#include "cli/roce_check.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/support/test_support.h"

namespace rocefab::cli {
namespace {

const char* kTopology = rocefab::testing::kTwoRacksOneSpine;

// The policy of docs/controller.md: RoCE on DSCP 26 in lossless tc 3 with
// ECN, CNPs on DSCP 48 in strict-priority tc 6.
v1::QosPolicy SwitchQos() {
  v1::QosPolicy q;
  auto* a = q.add_dscp_to_tc();
  a->set_dscp(26);
  a->set_tc(3);
  auto* b = q.add_dscp_to_tc();
  b->set_dscp(48);
  b->set_tc(6);
  q.add_lossless_tcs(3);
  q.add_pfc_priorities(3);
  q.add_ecn()->set_tc(3);
  q.set_strict_priority_tc(6);
  return q;
}

// A NIC set up to match.
NicRoce Good() {
  NicRoce n;
  n.values = {{"mtu_bytes", 4200}, {"roce_tos", 106}, {"roce_prio", 3}, {"dscp_trust", 1}, {"cnp_dscp", 48}};
  for (uint32_t p = 0; p < 8; ++p) {
    n.per_prio["pfc_enabled"][p] = p == 3;
    n.per_prio["roce_ecn_np_enabled"][p] = p == 3;
  }
  return n;
}

std::set<std::string> Settings(const RoceCheck& c) {
  std::set<std::string> out;
  for (const auto& m : c.mismatches) out.insert(m.setting);
  return out;
}

TEST(CheckRoce, AMatchingNicPassesAndEachDisagreementIsNamed) {
  auto topo = Topology::FromYaml(kTopology, "t");
  ASSERT_TRUE(topo.ok());
  const std::map<std::string, v1::QosPolicy> qos = {{"z1-rtsw01", SwitchQos()}, {"z1-rtsw02", SwitchQos()}};
  const RoceCheck good = CheckRoce(**topo, {{"z1-r01-h1/mlx5_0", Good()}}, qos);
  EXPECT_EQ(good.nics_checked, 1u);
  EXPECT_TRUE(good.mismatches.empty());

  struct Case {
    const char* setting;
    void (*spoil)(NicRoce&);
  };
  const Case cases[] = {
      {"pfc_enabled", [](NicRoce& n) { n.per_prio["pfc_enabled"][4] = 1; }},
      {"dscp_trust", [](NicRoce& n) { n.values["dscp_trust"] = 0; }},
      {"roce_tos", [](NicRoce& n) { n.values["roce_tos"] = 48 << 2; n.values["roce_prio"] = 6; }},
      {"roce_prio", [](NicRoce& n) { n.values["roce_prio"] = 4; }},
      {"roce_ecn_np_enabled", [](NicRoce& n) { n.per_prio["roce_ecn_np_enabled"][3] = 0; }},
      {"cnp_dscp", [](NicRoce& n) { n.values["cnp_dscp"] = 26; }},
  };
  for (const Case& c : cases) {
    NicRoce bad = Good();
    c.spoil(bad);
    const RoceCheck check = CheckRoce(**topo, {{"z1-r01-h1/mlx5_0", Good()}, {"z1-r02-h1/mlx5_0", bad}}, qos);
    EXPECT_EQ(Settings(check), std::set<std::string>{c.setting}) << c.setting;
    for (const auto& m : check.mismatches) {
      EXPECT_EQ(m.nic, "z1-r02-h1/mlx5_0");
      EXPECT_EQ(m.switch_port, "z1-rtsw02/Ethernet0");
      EXPECT_FALSE(m.why.empty());
    }
  }
}

TEST(CheckRoce, WhatIsNotReportedIsCountedAndASwitchWithoutQosIsNotChecked) {
  auto topo = Topology::FromYaml(kTopology, "t");
  ASSERT_TRUE(topo.ok());
  NicRoce sparse;  // an upstream kernel without dcbnl: only the MTU
  sparse.values["mtu_bytes"] = 1500;
  const RoceCheck check = CheckRoce(**topo, {{"z1-r01-h1/mlx5_0", sparse}, {"z1-r02-h1/mlx5_0", Good()}},
                                    {{"z1-rtsw01", SwitchQos()}});
  EXPECT_EQ(check.nics_checked, 1u);
  EXPECT_TRUE(check.mismatches.empty()) << "unknown is not wrong";
  EXPECT_EQ(check.unknown.at("pfc_enabled"), 1u);
  EXPECT_EQ(check.unknown.at("roce_tos"), 1u);
  ASSERT_FALSE(check.notes.empty());
  EXPECT_NE(check.notes[0].find("1 NIC(s) face a switch that reports no applied QoS"), std::string::npos);
}

}  // namespace
}  // namespace rocefab::cli
