// Hostlists and ranks files come from the scheduler and operators.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cli/job_commands.h"
#include "common/hostlist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (16 << 10)) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // The cap's logic is the same at any size; a small one keeps each run
  // cheap (a 10,000-name expansion is 10,000 allocations under ASan).
  constexpr size_t kMaxHosts = 1000;
  auto hosts = rocefab::ExpandHostlist(text, kMaxHosts);
  if (hosts.ok() && hosts->size() > kMaxHosts) __builtin_trap();
  (void)rocefab::cli::ParseRanksFile(text, "fuzz");
  return 0;
}
