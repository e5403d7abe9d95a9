#pragma once
// One netlink message from a fuzz input, as a socket would deliver it: the
// bytes copied to aligned storage, the header's length clamped to them.
#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace rocefab::fuzz {

// nullptr when the input cannot hold a header (or is too large to matter).
inline nlmsghdr* NetlinkMessage(const uint8_t* data, size_t size, std::vector<uint64_t>* storage) {
  if (size < sizeof(nlmsghdr) || size > 65536) return nullptr;
  storage->assign((size + 7) / 8, 0);
  std::memcpy(storage->data(), data, size);
  auto* header = reinterpret_cast<nlmsghdr*>(storage->data());
  if (header->nlmsg_len > size || header->nlmsg_len < sizeof(nlmsghdr)) header->nlmsg_len = static_cast<uint32_t>(size);
  return header;
}

}  // namespace rocefab::fuzz
