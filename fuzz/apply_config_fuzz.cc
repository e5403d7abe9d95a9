// Fuzzes switchd's ApplyConfig RPC as the service takes it
// (agents/switch/config_service.h): the input is split in two
// ApplyConfigRequest messages applied one after the other, the way a
// controller rolls a generation out and then another. Any bytes that parse
// must be applied or refused with a reason; a refused request leaves the
// backend exactly as it was; GetState reports what was last applied.
#include <cstddef>
#include <cstdint>
#include <map>

#include "agents/switch/config_applier.h"
#include "fuzz/memory_backend.h"
#include "agents/switch/config_service.h"
#include "common/authz.h"

using rocefab::fuzz::MemoryBackend;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t split = std::min<size_t>(data[0], size - 1);
  MemoryBackend backend;
  rocefab::switchd::ConfigApplier applier("s1", backend, "");
  const rocefab::Authorizer in_process({}, /*enforce=*/true);
  rocefab::switchd::ConfigService service(applier, in_process);
  uint64_t last_applied = 0;
  for (auto [begin, length] : {std::pair<size_t, size_t>{1, split}, std::pair<size_t, size_t>{1 + split, size - 1 - split}}) {
    rocefab::v1::ApplyConfigRequest request;
    if (!request.ParseFromArray(data + begin, static_cast<int>(length))) continue;
    const auto before = backend.state;
    rocefab::v1::ApplyConfigResponse response;
    // A null context: an in-process call, past authorization.
    if (!service.ApplyConfig(nullptr, &request, &response).ok()) __builtin_trap();
    if (!response.ok() && response.error().empty()) __builtin_trap();
    if (!response.ok() && backend.state != before) __builtin_trap();  // rolled back exactly
    if (response.ok()) last_applied = response.state().applied_generation();
    rocefab::v1::SwitchState state;
    if (!service.GetState(nullptr, nullptr, &state).ok()) __builtin_trap();
    if (state.applied_generation() != last_applied) __builtin_trap();
  }
  return 0;
}
