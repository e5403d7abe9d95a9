// A switch agent takes SwitchConfig protobufs from the controller (and from
// its own state file at start): any bytes that parse must apply or be
// refused cleanly, and a refused apply must leave the applied state as it was.
#include <cstddef>
#include <cstdint>
#include <map>

#include "agents/switch/config_applier.h"
#include "fuzz/memory_backend.h"

using rocefab::fuzz::MemoryBackend;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rocefab::v1::SwitchConfig config;
  if (!config.ParseFromArray(data, static_cast<int>(size))) return 0;
  config.set_switch_name("s1");
  MemoryBackend backend;
  rocefab::switchd::ConfigApplier applier("s1", backend, "");
  rocefab::v1::SwitchConfig base;
  base.set_switch_name("s1");
  base.set_generation(1);
  auto* item = base.add_items();
  item->set_key("route/10.0.0.0/24");
  item->mutable_route()->set_prefix("10.0.0.0/24");
  if (!applier.Apply(base).ok()) __builtin_trap();
  const auto before = backend.state;
  const auto response = applier.Apply(config);
  if (!response.ok() && response.error().empty()) __builtin_trap();
  if (!response.ok() && backend.state != before) __builtin_trap();  // rolled back exactly
  return 0;
}
