#include "lab/topology_gen.h"

#include <gtest/gtest.h>

#include <chrono>

#include "common/topology.h"

namespace rocefab::lab {
namespace {

TEST(GenerateTopology, DemoFabricNamesAndCounts) {
  TopologyParams params;  // 1 zone, 8 racks x 2 hosts x 8 NICs, 4 CTSWs
  auto proto = GenerateTopology(params);
  ASSERT_TRUE(proto.ok());
  auto topo = Topology::Build(*proto);
  ASSERT_TRUE(topo.ok()) << topo.status();
  EXPECT_EQ(proto->hosts_size(), 16);
  EXPECT_EQ(proto->switches_size(), 12);
  ASSERT_NE((*topo)->FindHost("z1-r03-h1"), nullptr);
  ASSERT_NE((*topo)->FindSwitch("z1-rtsw03"), nullptr);
  ASSERT_NE((*topo)->FindSwitch("z1-ctsw02"), nullptr);
  EXPECT_EQ((*topo)->FindHost("z1-r03-h1")->nics(3).name(), "mlx5_3");
  // Rack 3 host 1 NIC 3 sits on rtsw03 port 3 (Ethernet12).
  EXPECT_EQ((*topo)->PeerOf((*topo)->LinkOfPort("z1-r03-h1/mlx5_3"), "z1-r03-h1/mlx5_3"),
            "z1-rtsw03/Ethernet12");
  // 16 host ports and 16 uplinks (4 per CTSW): 1:1 inside the zone.
  EXPECT_EQ((*topo)->PortsOf("z1-rtsw03").size(), 32u);
  EXPECT_EQ((*topo)->PortsOf("z1-ctsw01").size(), 32u);
}

TEST(GenerateTopology, ZonesJoinThroughAtswsWithTheUplinkRatio) {
  TopologyParams params;
  params.zones = 2;
  params.racks_per_zone = 7;
  params.hosts_per_rack = 1;
  params.nics_per_host = 4;
  params.ctsw_per_zone = 4;
  params.atsw = 2;
  params.uplink_ratio = 7;
  auto proto = GenerateTopology(params);
  ASSERT_TRUE(proto.ok());
  auto topo = Topology::Build(*proto);
  ASSERT_TRUE(topo.ok()) << topo.status();
  // Each CTSW has 7 racks x 1 link down, so 7/7 = 1 uplink to the ATSWs.
  EXPECT_EQ((*topo)->PortsOf("z1-ctsw01").size(), 8u);
  EXPECT_EQ((*topo)->PortsOf("atsw01").size() + (*topo)->PortsOf("atsw02").size(), 8u);
}

TEST(GenerateTopology, RejectsImpossibleShapes) {
  TopologyParams params;
  params.zones = 2;  // no ATSW to join them
  EXPECT_FALSE(GenerateTopology(params).ok());
  params = {};
  params.racks_per_zone = 0;
  EXPECT_FALSE(GenerateTopology(params).ok());
  params = {};
  params.uplink_ratio = 0.5;
  params.atsw = 1;
  EXPECT_FALSE(GenerateTopology(params).ok());
}

TEST(GenerateTopology, Llama3Scale) {
  // 24,576 GPUs: 8 zones x 192 racks x 2 hosts x 8 NICs, 1:7 above the pods.
  const TopologyParams params = Llama3Params();
  const auto start = std::chrono::steady_clock::now();
  auto proto = GenerateTopology(params);
  ASSERT_TRUE(proto.ok());
  auto topo = Topology::Build(*proto);
  ASSERT_TRUE(topo.ok()) << topo.status();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  size_t nics = 0;
  for (const auto& host : proto->hosts()) nics += host.nics_size();
  EXPECT_EQ(nics, 24576u);
  EXPECT_EQ(proto->hosts_size(), 3072);
  EXPECT_EQ(proto->switches_size(), 8 * 192 + 8 * 16 + 16);
  ASSERT_NE((*topo)->FindHost("z8-r192-h2"), nullptr);
  ASSERT_NE((*topo)->FindSwitch("z3-rtsw007"), nullptr);
  RecordProperty("generate_and_validate_seconds", std::to_string(seconds));
}

}  // namespace
}  // namespace rocefab::lab
