// Controller policies are files operators write: validation and compilation
// must survive anything that loads.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/config_loader.h"
#include "controller/compiler.h"
#include "lab/topology_gen.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (64 << 10)) return 0;
  rocefab::v1::Policy policy;
  if (!rocefab::LoadYamlConfig(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yaml",
                               &policy)
           .ok())
    return 0;
  auto valid = rocefab::controller::ValidatePolicy(policy);
  if (!valid.ok()) return 0;
  static const auto topology = [] {
    rocefab::lab::TopologyParams params;
    params.racks_per_zone = 2;
    params.hosts_per_rack = 1;
    params.nics_per_host = 2;
    params.ctsw_per_zone = 2;
    return *rocefab::Topology::Build(*rocefab::lab::GenerateTopology(params));
  }();
  auto configs = rocefab::controller::Compile(*topology, *valid, {"z1-rtsw01/Ethernet8"}, 1);
  if (!configs.ok()) return 0;
  for (const auto& [name, config] : *configs)
    if (config.content_hash().size() != 64) __builtin_trap();
  return 0;
}
