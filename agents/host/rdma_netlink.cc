#include "agents/host/rdma_netlink.h"

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <rdma/rdma_netlink.h>

#include <cstring>

#include "common/strings.h"

namespace rocefab::hostd {
namespace {

constexpr int kGetType = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET);
constexpr int kStatGetType = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_STAT_GET);

bool U32(const nlattr* attr, uint32_t* out) {
  if (attr == nullptr || nla_len(attr) < static_cast<int>(sizeof(uint32_t))) return false;
  std::memcpy(out, nla_data(attr), sizeof(uint32_t));
  return true;
}

bool U64(const nlattr* attr, uint64_t* out) {
  if (attr == nullptr || nla_len(attr) < static_cast<int>(sizeof(uint64_t))) return false;
  std::memcpy(out, nla_data(attr), sizeof(uint64_t));
  return true;
}

// A NUL-terminated string attribute; false when empty or unterminated.
bool String(const nlattr* attr, std::string* out) {
  if (attr == nullptr || nla_len(attr) <= 0) return false;
  const char* data = static_cast<const char*>(nla_data(attr));
  const size_t length = strnlen(data, static_cast<size_t>(nla_len(attr)));
  if (length == 0 || length == static_cast<size_t>(nla_len(attr))) return false;
  out->assign(data, length);
  return true;
}

absl::Status ParseTop(const nlmsghdr* reply, int type, nlattr** tb) {
  if (reply == nullptr || reply->nlmsg_len < NLMSG_HDRLEN)
    return absl::InvalidArgumentError("a truncated RDMA netlink message");
  if (reply->nlmsg_type != type)
    return absl::InvalidArgumentError(StrCat("RDMA netlink message of type ", reply->nlmsg_type,
                                             ", expected ", type));
  if (nlmsg_parse(const_cast<nlmsghdr*>(reply), 0, tb, RDMA_NLDEV_ATTR_MAX, nullptr) < 0)
    return absl::InvalidArgumentError("malformed RDMA netlink attributes");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RdmaDevice> ParseRdmaDeviceReply(const nlmsghdr* reply) {
  nlattr* tb[RDMA_NLDEV_ATTR_MAX + 1] = {};
  if (auto status = ParseTop(reply, kGetType, tb); !status.ok()) return status;
  RdmaDevice device;
  if (!U32(tb[RDMA_NLDEV_ATTR_DEV_INDEX], &device.index))
    return absl::InvalidArgumentError("RDMA device without RDMA_NLDEV_ATTR_DEV_INDEX");
  if (!String(tb[RDMA_NLDEV_ATTR_DEV_NAME], &device.name))
    return absl::InvalidArgumentError("RDMA device without a name");
  return device;
}

absl::StatusOr<RdmaPortCounters> ParseRdmaStatReply(const nlmsghdr* reply) {
  nlattr* tb[RDMA_NLDEV_ATTR_MAX + 1] = {};
  if (auto status = ParseTop(reply, kStatGetType, tb); !status.ok()) return status;
  RdmaPortCounters out;
  if (!U32(tb[RDMA_NLDEV_ATTR_DEV_INDEX], &out.device_index))
    return absl::InvalidArgumentError("statistics without RDMA_NLDEV_ATTR_DEV_INDEX");
  if (!U32(tb[RDMA_NLDEV_ATTR_PORT_INDEX], &out.port))
    return absl::InvalidArgumentError("statistics without RDMA_NLDEV_ATTR_PORT_INDEX");
  if (tb[RDMA_NLDEV_ATTR_STAT_HWCOUNTERS] == nullptr)
    return absl::InvalidArgumentError("statistics without RDMA_NLDEV_ATTR_STAT_HWCOUNTERS");
  nlattr* entry;
  int remaining;
  nla_for_each_nested(entry, tb[RDMA_NLDEV_ATTR_STAT_HWCOUNTERS], remaining) {
    // The padding attribute (type 0) may sit anywhere; other types are not
    // counters.
    if (nla_type(entry) != RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY) continue;
    nlattr* fields[RDMA_NLDEV_ATTR_MAX + 1] = {};
    if (nla_parse_nested(fields, RDMA_NLDEV_ATTR_MAX, entry, nullptr) < 0)
      return absl::InvalidArgumentError("a malformed RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY");
    std::string name;
    uint64_t value = 0;
    if (!String(fields[RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME], &name) ||
        !U64(fields[RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE], &value))
      return absl::InvalidArgumentError("a hardware counter without a name or a value");
    out.counters.emplace_back(std::move(name), value);
  }
  return out;
}

RdmaNetlinkSource::RdmaNetlinkSource() {
  sock_ = nl_socket_alloc();
  if (sock_ == nullptr) {
    reason_ = "cannot allocate a netlink socket";
    return;
  }
  if (int err = nl_connect(sock_, NETLINK_RDMA); err < 0) {
    reason_ = StrCat("NETLINK_RDMA: ", nl_geterror(err), " (a kernel without the RDMA subsystem)");
    nl_socket_free(sock_);
    sock_ = nullptr;
    return;
  }
  // The kernel answers a request, or sends an error; no ack on success.
  nl_socket_disable_auto_ack(sock_);
}

RdmaNetlinkSource::~RdmaNetlinkSource() {
  if (sock_ != nullptr) nl_socket_free(sock_);
}

namespace {

struct DeviceDump {
  std::unordered_map<std::string, uint32_t>* index;
  int bad = 0;
};

int OnDevice(nl_msg* msg, void* arg) {
  auto* dump = static_cast<DeviceDump*>(arg);
  auto device = ParseRdmaDeviceReply(nlmsg_hdr(msg));
  if (device.ok()) (*dump->index)[device->name] = device->index;
  else ++dump->bad;
  return NL_OK;
}

int OnStat(nl_msg* msg, void* arg) {
  *static_cast<absl::StatusOr<RdmaPortCounters>*>(arg) = ParseRdmaStatReply(nlmsg_hdr(msg));
  return NL_OK;
}

}  // namespace

absl::Status RdmaNetlinkSource::ReadDevices() {
  nl_msg* msg = nlmsg_alloc_simple(kGetType, NLM_F_REQUEST | NLM_F_DUMP);
  if (msg == nullptr) return absl::ResourceExhaustedError("nlmsg_alloc");
  std::unordered_map<std::string, uint32_t> index;
  DeviceDump dump{&index};
  nl_socket_modify_cb(sock_, NL_CB_VALID, NL_CB_CUSTOM, OnDevice, &dump);
  int err = nl_send_auto(sock_, msg);
  nlmsg_free(msg);
  if (err >= 0) err = nl_recvmsgs_default(sock_);
  if (err < 0) return absl::UnavailableError(StrCat("RDMA netlink device dump: ", nl_geterror(err)));
  index_ = std::move(index);
  if (dump.bad > 0)
    return absl::InvalidArgumentError(StrCat("RDMA netlink device dump: ", dump.bad, " malformed devices"));
  return absl::OkStatus();
}

absl::StatusOr<RdmaCounters> RdmaNetlinkSource::Stat(uint32_t index, uint32_t port) {
  nl_msg* msg = nlmsg_alloc_simple(kStatGetType, NLM_F_REQUEST);
  if (msg == nullptr) return absl::ResourceExhaustedError("nlmsg_alloc");
  if (nla_put_u32(msg, RDMA_NLDEV_ATTR_DEV_INDEX, index) < 0 ||
      nla_put_u32(msg, RDMA_NLDEV_ATTR_PORT_INDEX, port) < 0) {
    nlmsg_free(msg);
    return absl::InternalError("building the RDMA netlink statistics request");
  }
  absl::StatusOr<RdmaPortCounters> reply = absl::UnavailableError("no RDMA netlink statistics reply");
  nl_socket_modify_cb(sock_, NL_CB_VALID, NL_CB_CUSTOM, OnStat, &reply);
  int err = nl_send_auto(sock_, msg);
  nlmsg_free(msg);
  if (err >= 0) err = nl_recvmsgs_default(sock_);
  if (err < 0) return absl::UnavailableError(StrCat("RDMA netlink statistics: ", nl_geterror(err)));
  if (!reply.ok()) return reply.status();
  if (reply->device_index != index || reply->port != port)
    return absl::InvalidArgumentError(StrCat("RDMA netlink statistics for device ", reply->device_index,
                                             " port ", reply->port, ", asked for ", index, " port ", port));
  return std::move(reply->counters);
}

absl::StatusOr<RdmaCounters> RdmaNetlinkSource::HwCounters(const std::string& device, uint32_t port) {
  if (sock_ == nullptr) return absl::UnavailableError(reason_);
  auto it = index_.find(device);
  if (it == index_.end()) {
    if (auto status = ReadDevices(); !status.ok() && !absl::IsInvalidArgument(status)) return status;
    it = index_.find(device);
    if (it == index_.end()) return absl::NotFoundError(StrCat("RDMA netlink: no device ", device));
  }
  auto counters = Stat(it->second, port);
  if (counters.ok() || absl::IsInvalidArgument(counters.status())) return counters;
  // A device registered again gets a new index: look it up once more.
  const uint32_t old_index = it->second;
  if (!ReadDevices().ok()) return counters;
  it = index_.find(device);
  if (it == index_.end()) return absl::NotFoundError(StrCat("RDMA netlink: no device ", device));
  if (it->second == old_index) return counters;
  return Stat(it->second, port);
}

}  // namespace rocefab::hostd
