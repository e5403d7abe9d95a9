// dcbnl DCB_CMD_IEEE_GET replies as rocefab-hostd reads them from the
// kernel (agents/host/roce_settings.h ParseDcbIeeeReply): the input is one
// netlink message, header included. Its length field is clamped to the
// bytes given, as the socket layer guarantees; the rest is arbitrary.
#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "agents/host/roce_settings.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < sizeof(nlmsghdr) || size > 65536) return 0;
  std::vector<uint64_t> aligned((size + 7) / 8);
  std::memcpy(aligned.data(), data, size);
  auto* header = reinterpret_cast<nlmsghdr*>(aligned.data());
  if (header->nlmsg_len > size || header->nlmsg_len < sizeof(nlmsghdr)) header->nlmsg_len = static_cast<uint32_t>(size);
  auto parsed = rocefab::hostd::ParseDcbIeeeReply(header);
  if (parsed.ok()) {
    for (const auto& [dscp, prio] : parsed->dscp_to_prio)
      if (dscp >= 64 || prio >= 8) __builtin_trap();
    rocefab::hostd::RoceSettings settings;
    rocefab::hostd::MergeDcb(*parsed, &settings);
    if (parsed->pfc_en && settings.pfc_enabled.size() != 8) __builtin_trap();
  }
  return 0;
}
