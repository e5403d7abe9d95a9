// The lab and the compiler together: the same fabric and job routed by the
// configs the controller compiles. Switching the scheme from ecmp to eecmp
// (QP entropy in the hash, and 4 QPs per connection) spreads the job over
// the uplinks: bus bandwidth rises and the link imbalance falls.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/config_loader.h"
#include "controller/compiler.h"
#include "lab/fabric_model.h"
#include "lab/topology_gen.h"

namespace rocefab {
namespace {

struct Outcome {
  double busbw = 0;
  double max_uplink = 0;  // utilisation of the busiest RTSW uplink
  double imbalance = 0;   // max / mean over every RTSW uplink
};

Outcome RunWith(const std::string& scheme) {
  lab::TopologyParams params;  // the demo zone
  auto topo = *Topology::Build(*lab::GenerateTopology(params));
  v1::Scenario scenario;
  EXPECT_TRUE(LoadYamlConfig("jobs: [{id: \"4711\", num_hosts: 8, placement: spread}]",
                             "s.yaml", &scenario)
                  .ok());
  auto model = *lab::FabricModel::Create(topo, scenario);
  v1::Policy policy;
  EXPECT_TRUE(LoadYamlConfig("default_scheme: " + scheme, "p.yaml", &policy).ok());
  auto configs = controller::Compile(*topo, *controller::ValidatePolicy(policy), {}, 1);
  EXPECT_TRUE(configs.ok()) << configs.status();
  for (const auto& [name, config] : *configs) model->SetAppliedConfig(config);
  model->Step(0.5, nullptr);
  Outcome out;
  out.busbw = model->jobs()[0].busbw_gbs;
  double sum = 0;
  int used = 0;
  for (const auto& port : model->ports()) {
    if (port.device.find("rtsw") == std::string::npos) continue;
    const std::string name = port.device + "/" + port.name;
    if (topo->PeerOf(port.link, name).find("ctsw") == std::string::npos) continue;
    const double u = model->ChannelUtilization(port.out_channel);
    out.max_uplink = std::max(out.max_uplink, u);
    sum += u;
    ++used;
  }
  out.imbalance = used ? out.max_uplink / (sum / used) : 0;
  return out;
}

TEST(SchemeInTheLab, EecmpRaisesBusBandwidthAndEvensTheUplinks) {
  const Outcome ecmp = RunWith("ecmp");
  const Outcome eecmp = RunWith("eecmp");
  RecordProperty("ecmp_busbw_gbs", std::to_string(ecmp.busbw));
  RecordProperty("eecmp_busbw_gbs", std::to_string(eecmp.busbw));
  RecordProperty("ecmp_imbalance", std::to_string(ecmp.imbalance));
  RecordProperty("eecmp_imbalance", std::to_string(eecmp.imbalance));
  EXPECT_GT(eecmp.busbw, ecmp.busbw * 1.2) << "ecmp " << ecmp.busbw << " eecmp " << eecmp.busbw;
  EXPECT_LT(eecmp.imbalance, ecmp.imbalance) << "ecmp " << ecmp.imbalance << " eecmp " << eecmp.imbalance;
}

TEST(SchemeInTheLab, PathPinningKeepsEachRackOnItsUplink) {
  lab::TopologyParams params;
  params.racks_per_zone = 4;
  params.hosts_per_rack = 2;
  params.nics_per_host = 4;
  params.ctsw_per_zone = 2;
  auto topo = *Topology::Build(*lab::GenerateTopology(params));
  v1::Scenario scenario;
  ASSERT_TRUE(LoadYamlConfig("jobs: [{id: \"1\", hosts: [z1-r01-h1, z1-r02-h1], qps_per_connection: 8}]",
                             "s.yaml", &scenario)
                  .ok());
  auto model = *lab::FabricModel::Create(topo, scenario);
  v1::Policy policy;
  ASSERT_TRUE(LoadYamlConfig("default_scheme: path_pinning", "p.yaml", &policy).ok());
  auto configs = *controller::Compile(*topo, *controller::ValidatePolicy(policy), {}, 1);
  for (const auto& [name, config] : configs) model->SetAppliedConfig(config);
  model->Step(0.5, nullptr);
  // All traffic from rack 1 to rack 2 rides the one uplink pinned for 10.1.2.0/24.
  int carrying = 0;
  for (const auto& port : model->ports()) {
    if (port.device != "z1-rtsw01") continue;
    if (topo->PeerOf(port.link, "z1-rtsw01/" + port.name).find("ctsw") == std::string::npos) continue;
    if (port.c.tx_bytes > 0) ++carrying;
  }
  EXPECT_EQ(carrying, 1);
}

TEST(SchemeInTheLab, DrainedUplinkCarriesNothing) {
  lab::TopologyParams params;
  auto topo = *Topology::Build(*lab::GenerateTopology(params));
  v1::Scenario scenario;
  ASSERT_TRUE(LoadYamlConfig("jobs: [{id: \"1\", num_hosts: 8, placement: spread, qps_per_connection: 8}]",
                             "s.yaml", &scenario)
                  .ok());
  auto model = *lab::FabricModel::Create(topo, scenario);
  v1::Policy policy;
  ASSERT_TRUE(LoadYamlConfig("default_scheme: eecmp", "p.yaml", &policy).ok());
  auto configs = *controller::Compile(*topo, *controller::ValidatePolicy(policy), {"z1-rtsw01/Ethernet64"}, 2);
  for (const auto& [name, config] : configs) model->SetAppliedConfig(config);
  model->Step(0.5, nullptr);
  const auto& port = model->ports()[model->PortIndex("z1-rtsw01/Ethernet64")];
  EXPECT_EQ(port.c.tx_bytes, 0);
  EXPECT_EQ(port.c.rx_bytes, 0);
  EXPECT_GT(model->jobs()[0].busbw_gbs, 0);
}

}  // namespace
}  // namespace rocefab
