#include "common/topology.h"

#include <gtest/gtest.h>

#include <sstream>

namespace rocefab {
namespace {

constexpr char kSmall[] = R"(
switches:
  - {name: z1-rtsw01, role: rtsw, zone: z1}
  - {name: z1-ctsw01, role: ctsw, zone: z1}
hosts:
  - name: z1-r01-h1
    zone: z1
    rack: 1
    nics: [{name: mlx5_0, netdev: eth0, gpu: 0, ip: 10.1.1.1}]
links:
  - {a: z1-r01-h1/mlx5_0, b: z1-rtsw01/Ethernet0, speed_gbps: 400}
  - {a: z1-rtsw01/Ethernet4, b: z1-ctsw01/Ethernet0, speed_gbps: 400}
)";

TEST(Topology, LoadsAndIndexes) {
  auto topo = Topology::FromYaml(kSmall, "small.yaml");
  ASSERT_TRUE(topo.ok()) << topo.status();
  EXPECT_EQ((*topo)->FindSwitch("z1-rtsw01")->role(), v1::SWITCH_ROLE_RTSW);
  EXPECT_EQ((*topo)->FindHost("z1-r01-h1")->nics(0).ip(), "10.1.1.1");
  EXPECT_EQ((*topo)->FindHost("nope"), nullptr);
  const int link = (*topo)->LinkOfPort("z1-r01-h1/mlx5_0");
  EXPECT_EQ(link, 0);
  EXPECT_EQ((*topo)->PeerOf(link, "z1-r01-h1/mlx5_0"), "z1-rtsw01/Ethernet0");
  EXPECT_EQ((*topo)->PortsOf("z1-rtsw01"), (std::vector<std::string>{"Ethernet0", "Ethernet4"}));
  EXPECT_EQ((*topo)->LinkOfPort("z1-rtsw01/Ethernet8"), -1);
}

TEST(Topology, WriteThenLoadRoundTrips) {
  auto topo = Topology::FromYaml(kSmall, "small.yaml");
  ASSERT_TRUE(topo.ok());
  std::ostringstream out;
  WriteTopologyYaml((*topo)->proto(), out);
  auto again = Topology::FromYaml(out.str(), "written.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << out.str();
  EXPECT_EQ((*again)->proto().SerializeAsString(), (*topo)->proto().SerializeAsString());
}

struct Bad {
  const char* name;
  const char* yaml;
  const char* expected;
};

class TopologyRejects : public ::testing::TestWithParam<Bad> {};

TEST_P(TopologyRejects, WithAClearMessage) {
  auto topo = Topology::FromYaml(GetParam().yaml, "t.yaml");
  ASSERT_FALSE(topo.ok());
  EXPECT_NE(std::string(topo.status().message()).find(GetParam().expected), std::string::npos)
      << topo.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Negative, TopologyRejects,
    ::testing::Values(
        Bad{"DuplicateSwitch",
            "switches: [{name: s1, role: rtsw, zone: z1}, {name: s1, role: ctsw, zone: z1}]",
            "switch s1: duplicate name"},
        Bad{"DanglingLink",
            "switches: [{name: s1, role: rtsw, zone: z1}]\n"
            "links: [{a: s1/Ethernet0, b: s9/Ethernet0, speed_gbps: 400}]",
            "no switch or host named s9"},
        Bad{"SelfLink",
            "switches: [{name: s1, role: rtsw, zone: z1}]\n"
            "links: [{a: s1/Ethernet0, b: s1/Ethernet4, speed_gbps: 400}]",
            "links a device to itself"},
        Bad{"NicWithoutLink",
            "hosts: [{name: h1, zone: z1, rack: 1, nics: [{name: mlx5_0}]}]",
            "host h1: nic mlx5_0 has no link"},
        Bad{"BadSpeed",
            "switches: [{name: s1, role: rtsw, zone: z1}, {name: s2, role: ctsw, zone: z1}]\n"
            "links: [{a: s1/Ethernet0, b: s2/Ethernet0, speed_gbps: 333}]",
            "is not an Ethernet speed"},
        Bad{"ZeroSpeed",
            "switches: [{name: s1, role: rtsw, zone: z1}, {name: s2, role: ctsw, zone: z1}]\n"
            "links: [{a: s1/Ethernet0, b: s2/Ethernet0}]",
            "is not an Ethernet speed"},
        Bad{"PortTwice",
            "switches: [{name: s1, role: rtsw, zone: z1}, {name: s2, role: ctsw, zone: z1}]\n"
            "links: [{a: s1/Ethernet0, b: s2/Ethernet0, speed_gbps: 400},"
            " {a: s1/Ethernet0, b: s2/Ethernet4, speed_gbps: 400}]",
            "port s1/Ethernet0 is already cabled"},
        Bad{"WrongTier",
            "switches: [{name: s1, role: rtsw, zone: z1}, {name: a1, role: atsw}]\n"
            "links: [{a: s1/Ethernet0, b: a1/Ethernet0, speed_gbps: 400}]",
            "rtsw to atsw is not a fabric link"},
        Bad{"NicToSpine",
            "switches: [{name: c1, role: ctsw, zone: z1}]\n"
            "hosts: [{name: h1, zone: z1, rack: 1, nics: [{name: mlx5_0}]}]\n"
            "links: [{a: h1/mlx5_0, b: c1/Ethernet0, speed_gbps: 400}]",
            "a nic must connect to an rtsw"},
        Bad{"NoRole", "switches: [{name: s1, zone: z1}]", "role must be rtsw, ctsw or atsw"},
        Bad{"UnknownRole", "switches: [{name: s1, role: leaf, zone: z1}]", "unknown value 'leaf'"},
        Bad{"NotPortName",
            "switches: [{name: s1, role: rtsw, zone: z1}]\n"
            "links: [{a: s1, b: s1/Ethernet0, speed_gbps: 400}]",
            "is not <device>/<port>"},
        Bad{"UnknownKey", "switches: [{name: s1, role: rtsw, zone: z1, asic: th5}]",
            "t.yaml:1: key 'switches[0].asic': unknown key"}),
    [](const auto& info) { return info.param.name; });

TEST(Topology, ReportsEveryProblemNotJustTheFirst) {
  auto topo = Topology::FromYaml(
      "switches: [{name: s1, role: rtsw, zone: z1}, {name: s1, role: rtsw, zone: z1}]\n"
      "hosts: [{name: h1, zone: z1, rack: 1, nics: [{name: mlx5_0}]}]\n",
      "t.yaml");
  ASSERT_FALSE(topo.ok());
  const std::string message(topo.status().message());
  EXPECT_NE(message.find("2 problems"), std::string::npos) << message;
  EXPECT_NE(message.find("duplicate name"), std::string::npos);
  EXPECT_NE(message.find("has no link"), std::string::npos);
}

}  // namespace
}  // namespace rocefab
