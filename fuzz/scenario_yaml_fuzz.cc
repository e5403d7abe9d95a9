// Lab scenarios and topologies are files users write: both loaders, and a
// model built from whatever loads, must survive anything.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/config_loader.h"
#include "common/topology.h"
#include "lab/fabric_model.h"
#include "lab/topology_gen.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (64 << 10)) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)rocefab::Topology::FromYaml(text, "fuzz.yaml");
  rocefab::v1::Scenario scenario;
  if (!rocefab::LoadYamlConfig(text, "fuzz.yaml", &scenario).ok()) return 0;
  static const auto topology = [] {
    rocefab::lab::TopologyParams params;
    params.racks_per_zone = 2;
    params.hosts_per_rack = 2;
    params.nics_per_host = 2;
    params.ctsw_per_zone = 2;
    return *rocefab::Topology::Build(*rocefab::lab::GenerateTopology(params));
  }();
  // Keep runs short whatever the input asks for.
  for (auto& job : *scenario.mutable_jobs())
    if (job.num_hosts() > 8) job.set_num_hosts(8);
  auto model = rocefab::lab::FabricModel::Create(topology, scenario);
  if (!model.ok()) return 0;
  std::vector<rocefab::lab::CollectiveRecord> records;
  for (int i = 0; i < 3; ++i) (*model)->Step(0.5, &records);
  for (const auto& job : (*model)->jobs())
    if (!(job.busbw_gbs >= 0)) __builtin_trap();  // NaN or negative
  return 0;
}
