#include "controller/compiler.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

#include <vector>
#include <openssl/evp.h>

#include <cstdio>

#include "common/config_loader.h"
#include "common/strings.h"
#include "lab/topology_gen.h"

namespace rocefab::controller {
namespace {

// Four racks of two hosts with four NICs, two CTSWs.
std::shared_ptr<const Topology> Fabric() {
  return *lab::BuildGenerated({.racks_per_zone = 4, .hosts_per_rack = 2, .nics_per_host = 4, .ctsw_per_zone = 2});
}

v1::Policy PolicyFrom(const std::string& yaml) {
  v1::Policy policy;
  auto status = LoadYamlConfig(yaml, "policy.yaml", &policy);
  EXPECT_TRUE(status.ok()) << status;
  return policy;
}

constexpr char kPolicy[] = R"(
default_scheme: ecmp
qos:
  dscp_to_tc: [{dscp: 26, tc: 3}, {dscp: 48, tc: 6}]
  lossless_tcs: [3]
  pfc_priorities: [3]
  ecn: [{tc: 3, min_bytes: 150000, max_bytes: 1500000, probability: 0.1}]
  strict_priority_tc: 6
  pfc_watchdog: {detect_ms: 200, restore_ms: 400, action: drop}
  buffer_profiles:
    - {role: rtsw, pool_bytes: 32000000, xoff_bytes: 3000000, headroom_bytes: 1000000,
       pg_xon_bytes: 19456, pg_headroom_bytes: 160000}
    - {role: ctsw, pool_bytes: 128000000, xoff_bytes: 6000000, headroom_bytes: 2000000,
       pg_xon_bytes: 19456, pg_headroom_bytes: 320000}
)";

const v1::ConfigItem* Item(const v1::SwitchConfig& config, const std::string& key) {
  for (const auto& item : config.items())
    if (item.key() == key) return &item;
  return nullptr;
}

TEST(Compile, EcmpRoutesRemoteRacksOverEveryUplink) {
  auto policy = ValidatePolicy(PolicyFrom(kPolicy));
  ASSERT_TRUE(policy.ok()) << policy.status();
  auto configs = Compile(*Fabric(), *policy, {}, 7);
  ASSERT_TRUE(configs.ok()) << configs.status();
  const v1::SwitchConfig& rtsw = configs->at("z1-rtsw01");
  EXPECT_EQ(rtsw.generation(), 7u);
  EXPECT_EQ(rtsw.content_hash().size(), 64u);
  // Own hosts directly; the other 3 racks through one group of 8 uplinks.
  ASSERT_NE(Item(rtsw, "route/10.1.1.1/32"), nullptr);
  EXPECT_EQ(Item(rtsw, "route/10.1.1.1/32")->route().port(), "Ethernet0");
  const v1::ConfigItem* group = Item(rtsw, "nhg/1");
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->nexthop_group().nexthops_size(), 8);
  EXPECT_EQ(Item(rtsw, "route/10.1.2.0/24")->route().nexthop_group(), 1u);
  EXPECT_EQ(Item(rtsw, "route/10.1.1.0/24"), nullptr);
  EXPECT_EQ(Item(rtsw, "hash")->hash().fields_size(), 5);
  EXPECT_EQ(Item(rtsw, "qos/buffer")->qos().buffer().pool_bytes(), 32000000u);
  // The fixed XOFF threshold binds to the PGs of the lossless classes.
  EXPECT_EQ(std::vector<uint32_t>(Item(rtsw, "qos/buffer")->qos().buffer().lossless_pgs().begin(),
                                  Item(rtsw, "qos/buffer")->qos().buffer().lossless_pgs().end()),
            std::vector<uint32_t>{3});
  // A CTSW reaches each rack through its parallel links to that RTSW.
  const v1::SwitchConfig& ctsw = configs->at("z1-ctsw01");
  const uint32_t g = Item(ctsw, "route/10.1.3.0/24")->route().nexthop_group();
  EXPECT_EQ(Item(ctsw, "nhg/" + std::to_string(g))->nexthop_group().nexthops_size(), 4);
  // Same inputs, same bytes.
  auto again = Compile(*Fabric(), *policy, {}, 7);
  EXPECT_EQ(again->at("z1-rtsw01").content_hash(), rtsw.content_hash());
}

TEST(Compile, EecmpAddsQpEntropyAndPinningPinsSlices) {
  auto eecmp = Compile(*Fabric(), *ValidatePolicy(PolicyFrom("default_scheme: eecmp")), {}, 1);
  const auto& fields = Item(eecmp->at("z1-rtsw01"), "hash")->hash().fields();
  EXPECT_EQ(fields[fields.size() - 1], "roce_dst_qp");
  auto pinned = Compile(*Fabric(), *ValidatePolicy(PolicyFrom("default_scheme: path_pinning")), {}, 1);
  const v1::SwitchConfig& rtsw = pinned->at("z1-rtsw01");
  std::set<uint32_t> groups;
  for (const char* prefix : {"10.1.2.0/24", "10.1.3.0/24", "10.1.4.0/24"}) {
    const uint32_t g = Item(rtsw, std::string("route/") + prefix)->route().nexthop_group();
    EXPECT_EQ(Item(rtsw, "nhg/" + std::to_string(g))->nexthop_group().nexthops_size(), 1);
    groups.insert(g);
  }
  EXPECT_EQ(groups.size(), 3u) << "each destination slice on its own uplink";
  EXPECT_NE(pinned->at("z1-rtsw01").content_hash(), eecmp->at("z1-rtsw01").content_hash());
}

TEST(Compile, DrainedLinksLeaveEveryGroupOnBothSides) {
  auto policy = ValidatePolicy(PolicyFrom(kPolicy));
  auto configs = Compile(*Fabric(), *policy, {"z1-rtsw01/Ethernet32"}, 2);
  const v1::SwitchConfig& rtsw = configs->at("z1-rtsw01");
  EXPECT_EQ(Item(rtsw, "nhg/1")->nexthop_group().nexthops_size(), 7);
  for (const auto& hop : Item(rtsw, "nhg/1")->nexthop_group().nexthops()) EXPECT_NE(hop.port(), "Ethernet32");
  ASSERT_EQ(rtsw.drained_ports_size(), 1);
  // The CTSW end of that link is drained too.
  const std::string peer = Fabric()->PeerOf(Fabric()->LinkOfPort("z1-rtsw01/Ethernet32"), "z1-rtsw01/Ethernet32");
  const std::string ctsw = peer.substr(0, peer.find('/'));
  EXPECT_EQ(configs->at(ctsw).drained_ports_size(), 1);
  auto share = RemainingUplinkShare(*Fabric(), {"z1-rtsw01/Ethernet32"});
  EXPECT_DOUBLE_EQ(share.at("z1-rtsw01"), 7.0 / 8);
  EXPECT_DOUBLE_EQ(share.at("z1-rtsw02"), 1.0);
}

TEST(Compile, NoBlackholeThroughASpineThatLostItsLinksToTheRack) {
  // Every link between z1-ctsw01 and rack 2 drained: the other racks must
  // stop sending rack 2's traffic to z1-ctsw01.
  auto policy = ValidatePolicy(PolicyFrom(kPolicy));
  const std::set<std::string> drained = {"z1-rtsw02/Ethernet32", "z1-rtsw02/Ethernet36",
                                         "z1-rtsw02/Ethernet40", "z1-rtsw02/Ethernet44"};
  for (const auto& port : drained)
    ASSERT_NE(Fabric()->PeerOf(Fabric()->LinkOfPort(port), port).find("z1-ctsw01"), std::string::npos);
  auto configs = Compile(*Fabric(), *policy, drained, 3);
  ASSERT_TRUE(configs.ok());
  const v1::SwitchConfig& rtsw1 = configs->at("z1-rtsw01");
  const auto* to_rack2 = Item(rtsw1, "route/10.1.2.0/24");
  const auto* to_rack3 = Item(rtsw1, "route/10.1.3.0/24");
  ASSERT_NE(to_rack2, nullptr);
  const auto& group2 = Item(rtsw1, "nhg/" + std::to_string(to_rack2->route().nexthop_group()))->nexthop_group();
  const auto& group3 = Item(rtsw1, "nhg/" + std::to_string(to_rack3->route().nexthop_group()))->nexthop_group();
  EXPECT_EQ(group2.nexthops_size(), 4);
  EXPECT_EQ(group3.nexthops_size(), 8);
  for (const auto& hop : group2.nexthops()) {
    const std::string peer = Fabric()->PeerOf(Fabric()->LinkOfPort("z1-rtsw01/" + hop.port()), "z1-rtsw01/" + hop.port());
    EXPECT_NE(peer.find("z1-ctsw02"), std::string::npos) << hop.port();
  }
}

struct Bad {
  const char* name;
  const char* yaml;
  const char* expected;
};
class PolicyRejects : public ::testing::TestWithParam<Bad> {};

TEST_P(PolicyRejects, WithAClearMessage) {
  auto policy = ValidatePolicy(PolicyFrom(GetParam().yaml));
  ASSERT_FALSE(policy.ok());
  EXPECT_NE(std::string(policy.status().message()).find(GetParam().expected), std::string::npos)
      << policy.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Negative, PolicyRejects,
    ::testing::Values(
        Bad{"EcnMinAboveMax", "qos: {ecn: [{tc: 3, min_bytes: 2000000, max_bytes: 100000}]}",
            "min_bytes 2000000 is above max_bytes 100000"},
        Bad{"LosslessWithoutPfc", "qos: {lossless_tcs: [3], pfc_priorities: [4]}",
            "lossless tc 3 has no PFC"},
        Bad{"DscpTwice", "qos: {dscp_to_tc: [{dscp: 26, tc: 3}, {dscp: 26, tc: 4}]}",
            "dscp 26 is mapped twice"},
        Bad{"DscpRange", "qos: {dscp_to_tc: [{dscp: 64, tc: 3}]}", "dscp 64 is not 0-63"},
        Bad{"EcnProbability", "qos: {ecn: [{tc: 3, min_bytes: 1, max_bytes: 2, probability: 1.5}]}",
            "probability must be in [0, 1]"},
        Bad{"StrictClassPaused", "qos: {pfc_priorities: [3, 6], strict_priority_tc: 6}",
            "must not be a PFC priority"},
        Bad{"WatchdogAction", "qos: {pfc_watchdog: {action: reboot}}", "is not drop, forward or alert"},
        Bad{"ZoneTwice", "zones: [{zone: z1, scheme: ecmp}, {zone: z1, scheme: eecmp}]",
            "zone z1 listed twice"},
        Bad{"Capacity", "min_uplink_capacity: 1.5", "min_uplink_capacity must be in (0, 1]"},
        Bad{"XoffWithoutPgHeadroom",
            "qos: {lossless_tcs: [3], pfc_priorities: [3], buffer_profiles: [{role: rtsw, xoff_bytes: 3000000}]}",
            "xoff_bytes goes with pg_xon_bytes and pg_headroom_bytes"},
        Bad{"PgHeadroomWithoutXoff",
            "qos: {buffer_profiles: [{role: rtsw, pg_xon_bytes: 19456, pg_headroom_bytes: 160000}]}",
            "xoff_bytes goes with pg_xon_bytes and pg_headroom_bytes"},
        Bad{"XoffWithNoLosslessClass",
            "qos: {buffer_profiles: [{role: rtsw, xoff_bytes: 3000000, pg_xon_bytes: 1, pg_headroom_bytes: 1}]}",
            "xoff_bytes needs lossless_tcs"},
        Bad{"LosslessPgsInThePolicy",
            "qos: {lossless_tcs: [3], pfc_priorities: [3], buffer_profiles: [{role: rtsw, lossless_pgs: [3]}]}",
            "lossless_pgs come from lossless_tcs"}),
    [](const auto& info) { return info.param.name; });

// `scheme: te`: E-ECMP routes as the fallback, and each override as a rule
// over a single-uplink table route; an override on a drained uplink is
// left out, so its traffic keeps the fallback.
TEST(Compiler, TeOverridesBecomeRulesOverTheEecmpFallback) {
  v1::Policy policy;
  ASSERT_TRUE(LoadYamlConfig("default_scheme: te", "p.yaml", &policy).ok());
  auto valid = ValidatePolicy(policy);
  ASSERT_TRUE(valid.ok()) << valid.status();
  const std::vector<TeOverride> te = {{"z1-rtsw01/Ethernet0", "10.1.2.0/24", "z1-rtsw01/Ethernet32"},
                                      {"z1-rtsw01/Ethernet4", "10.1.2.0/24", "z1-rtsw01/Ethernet48"}};
  auto configs = Compile(*Fabric(), *valid, {}, 1, &te);
  ASSERT_TRUE(configs.ok()) << configs.status();
  const v1::SwitchConfig& rtsw = configs->at("z1-rtsw01");
  EXPECT_EQ(rtsw.qp_scaling_hint(), 4u);
  EXPECT_EQ(Item(rtsw, "hash")->hash().fields_size(), 6) << "roce_dst_qp in the fallback's hash";
  ASSERT_NE(Item(rtsw, "route/10.1.2.0/24"), nullptr) << "the ECMP fallback stays";
  const v1::ConfigItem* rule = Item(rtsw, "rule/Ethernet0/10.1.2.0/24");
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->rule().iif(), "Ethernet0");
  const std::string table_route = "route/t" + std::to_string(rule->rule().table()) + "/10.1.2.0/24";
  ASSERT_NE(Item(rtsw, table_route), nullptr);
  const uint32_t group = Item(rtsw, table_route)->route().nexthop_group();
  const v1::ConfigItem* nhg = Item(rtsw, "nhg/" + std::to_string(group));
  ASSERT_NE(nhg, nullptr);
  ASSERT_EQ(nhg->nexthop_group().nexthops_size(), 1);
  EXPECT_EQ(nhg->nexthop_group().nexthops(0).port(), "Ethernet32");
  // Drained: no rule for the override that used it.
  auto drained = Compile(*Fabric(), *valid, {"z1-rtsw01/Ethernet32"}, 2, &te);
  ASSERT_TRUE(drained.ok());
  EXPECT_EQ(Item(drained->at("z1-rtsw01"), "rule/Ethernet0/10.1.2.0/24"), nullptr);
  EXPECT_NE(Item(drained->at("z1-rtsw01"), "rule/Ethernet4/10.1.2.0/24"), nullptr);
}

}  // namespace
}  // namespace rocefab::controller

namespace rocefab::controller {
namespace {

// The content hash is what agents report back and what drift compares, so
// its definition must not move between releases (an upgrade would see
// every switch drift and push them all): SHA-256 over "<size>:<item>" per
// item, each item serialised deterministically, then "scheme:<n>qp:<n>".
TEST(ContentHash, IsSha256OverSizePrefixedDeterministicItemsThenSchemeAndQp) {
  auto configs = Compile(*Fabric(), *ValidatePolicy(PolicyFrom(kPolicy)), {}, 7);
  ASSERT_TRUE(configs.ok());
  for (const auto& [name, config] : *configs) {
    std::string bytes;
    for (const auto& item : config.items()) {
      std::string encoded;
      google::protobuf::io::StringOutputStream stream(&encoded);
      {
        google::protobuf::io::CodedOutputStream coded(&stream);
        coded.SetSerializationDeterministic(true);
        item.SerializeToCodedStream(&coded);
      }
      bytes += std::to_string(encoded.size()) + ":" + encoded;
    }
    bytes += "scheme:" + std::to_string(static_cast<int>(config.scheme())) + "qp:" +
             std::to_string(config.qp_scaling_hint());
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
    std::string hex;
    for (unsigned int i = 0; i < length; ++i) {
      char buf[3];
      std::snprintf(buf, sizeof buf, "%02x", digest[i]);
      hex += buf;
    }
    EXPECT_EQ(config.content_hash(), hex) << name;
  }
}

}  // namespace
}  // namespace rocefab::controller

namespace rocefab::controller {
namespace {

std::set<std::string> RouteKeys(const v1::SwitchConfig& config) {
  std::set<std::string> keys;
  for (const auto& item : config.items())
    if (item.has_route() && item.route().table() == 0) keys.insert(item.key());
  return keys;
}

// Two zones (10.1/16 and 10.2/16): an RTSW and a CTSW route the other zone
// by one /16, an ATSW each zone by its /16; the own zone keeps its racks'
// /24s, and path pinning, which slices by rack, keeps every /24.
TEST(Compile, OtherZonesRacksAreOneSlash16AndTheOwnZoneKeepsItsSlash24s) {
  auto topo = *lab::BuildGenerated(
      {.zones = 2, .racks_per_zone = 3, .hosts_per_rack = 1, .nics_per_host = 2, .ctsw_per_zone = 2, .atsw = 2});
  auto ecmp = Compile(*topo, *ValidatePolicy(PolicyFrom("default_scheme: ecmp")), {}, 1);
  ASSERT_TRUE(ecmp.ok()) << ecmp.status();
  const auto rtsw = RouteKeys(ecmp->at("z1-rtsw01"));
  EXPECT_TRUE(rtsw.count("route/10.2.0.0/16"));
  for (int rack = 1; rack <= 3; ++rack) EXPECT_FALSE(rtsw.count(StrCat("route/10.2.", rack, ".0/24")));
  EXPECT_TRUE(rtsw.count("route/10.1.2.0/24") && rtsw.count("route/10.1.3.0/24"));
  EXPECT_FALSE(rtsw.count("route/10.1.0.0/16")) << "the own zone is never aggregated";
  const auto ctsw = RouteKeys(ecmp->at("z1-ctsw01"));
  EXPECT_TRUE(ctsw.count("route/10.2.0.0/16") && ctsw.count("route/10.1.1.0/24"));
  EXPECT_FALSE(ctsw.count("route/10.2.1.0/24"));
  std::string atsw_name;
  for (const auto& sw : topo->proto().switches())
    if (sw.role() == v1::SWITCH_ROLE_ATSW) atsw_name = sw.name();
  ASSERT_FALSE(atsw_name.empty());
  const auto atsw = RouteKeys(ecmp->at(atsw_name));
  EXPECT_EQ(atsw, (std::set<std::string>{"route/10.1.0.0/16", "route/10.2.0.0/16"}));
  auto pinned = Compile(*topo, *ValidatePolicy(PolicyFrom("default_scheme: path_pinning")), {}, 1);
  ASSERT_TRUE(pinned.ok());
  const auto pinned_rtsw = RouteKeys(pinned->at("z1-rtsw01"));
  EXPECT_TRUE(pinned_rtsw.count("route/10.2.1.0/24"));
  EXPECT_FALSE(pinned_rtsw.count("route/10.2.0.0/16"));
}

}  // namespace
}  // namespace rocefab::controller
