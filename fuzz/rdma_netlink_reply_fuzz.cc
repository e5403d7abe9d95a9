// RDMA netlink replies as rocefab-hostd reads them from the kernel
// (agents/host/rdma_netlink.h ParseRdmaStatReply, ParseRdmaDeviceReply): the
// input is one netlink message, header included. Its length field is clamped
// to the bytes given, as the socket layer guarantees; the rest is arbitrary.
#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "agents/host/rdma_netlink.h"
#include "fuzz/netlink_message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint64_t> storage;
  nlmsghdr* header = rocefab::fuzz::NetlinkMessage(data, size, &storage);
  if (header == nullptr) return 0;
  auto stats = rocefab::hostd::ParseRdmaStatReply(header);
  if (stats.ok()) {
    for (const auto& [name, value] : stats->counters) {
      // Names are what a NUL-terminated attribute held: never empty, never
      // longer than the message.
      if (name.empty() || name.size() >= header->nlmsg_len) __builtin_trap();
      if (name.find('\0') != std::string::npos) __builtin_trap();
    }
  }
  auto device = rocefab::hostd::ParseRdmaDeviceReply(header);
  if (device.ok() && (device->name.empty() || device->name.find('\0') != std::string::npos)) __builtin_trap();
  if (stats.ok() && device.ok()) __builtin_trap();  // one message is one command's reply
  return 0;
}
