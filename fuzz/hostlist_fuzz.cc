// Hostlists and ranks files come from the scheduler and operators.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cli/job_commands.h"
#include "common/hostlist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (16 << 10)) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto hosts = rocefab::ExpandHostlist(text, 10000);
  if (hosts.ok() && hosts->size() > 10000) __builtin_trap();
  (void)rocefab::cli::ParseRanksFile(text, "fuzz");
  return 0;
}
