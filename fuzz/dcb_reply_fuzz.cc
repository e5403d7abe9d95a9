// dcbnl DCB_CMD_IEEE_GET replies as rocefab-hostd reads them from the
// kernel (common/dcb.h ParseDcbIeeeReply): the input is one
// netlink message, header included. Its length field is clamped to the
// bytes given, as the socket layer guarantees; the rest is arbitrary.
#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "agents/host/roce_settings.h"
#include "fuzz/netlink_message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint64_t> storage;
  nlmsghdr* header = rocefab::fuzz::NetlinkMessage(data, size, &storage);
  if (header == nullptr) return 0;
  auto parsed = rocefab::ParseDcbIeeeReply(header);
  if (parsed.ok()) {
    for (const auto& [dscp, prio] : parsed->dscp_to_prio)
      if (dscp >= 64 || prio >= 8) __builtin_trap();
    rocefab::hostd::RoceSettings settings;
    rocefab::hostd::MergeDcb(*parsed, &settings);
    if (parsed->pfc_en && settings.pfc_enabled.size() != 8) __builtin_trap();
  }
  return 0;
}
