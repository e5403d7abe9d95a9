// NCCL Inspector JSONL lines reach hostd from training processes: any bytes
// must parse to a sane record or an error.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agents/host/inspector_tailer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto record = rocefab::hostd::ParseInspectorLine(
      std::string_view(reinterpret_cast<const char*>(data), size), "4711");
  if (!record.ok()) return 0;
  if (record->op().empty() || !(record->exec_time_us() >= 0) || std::isnan(record->busbw_gbs()))
    __builtin_trap();
  return 0;
}
