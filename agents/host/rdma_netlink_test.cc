// RDMA netlink replies built with libnl in the layout of the kernel's
// drivers/infiniband/core/nldev.c (fill_nldev_handle, then the port and the
// RDMA_NLDEV_ATTR_STAT_HWCOUNTERS nest of rdma_nl_stat_hwcounter_entry),
// and the reader's merge of them with sysfs.
#include "agents/host/rdma_netlink.h"

#include <gtest/gtest.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <rdma/rdma_netlink.h>

#include <map>
#include <memory>

#include "agents/host/rdma_sysfs.h"
#include "tests/support/test_support.h"

namespace rocefab::hostd {
namespace {

constexpr int kStatGet = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_STAT_GET);
constexpr int kGet = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET);

using Msg = std::unique_ptr<nl_msg, decltype(&nlmsg_free)>;

Msg NewMsg(int type) { return Msg(nlmsg_alloc_simple(type, 0), &nlmsg_free); }

// A STAT_GET reply as the kernel builds it. A u64 is put after a zero-length
// RDMA_NLDEV_ATTR_PAD where the kernel's nla_put_u64_64bit would align it.
Msg StatReply(uint32_t index, const char* name, uint32_t port,
              const std::vector<std::pair<std::string, uint64_t>>& counters, bool pad = false) {
  Msg msg = NewMsg(kStatGet);
  nla_put_u32(msg.get(), RDMA_NLDEV_ATTR_DEV_INDEX, index);
  nla_put_string(msg.get(), RDMA_NLDEV_ATTR_DEV_NAME, name);
  nla_put_u32(msg.get(), RDMA_NLDEV_ATTR_PORT_INDEX, port);
  nlattr* table = nla_nest_start(msg.get(), RDMA_NLDEV_ATTR_STAT_HWCOUNTERS);
  for (const auto& [counter, value] : counters) {
    nlattr* entry = nla_nest_start(msg.get(), RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY);
    nla_put_string(msg.get(), RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, counter.c_str());
    if (pad) nla_put(msg.get(), RDMA_NLDEV_ATTR_PAD, 0, nullptr);
    nla_put_u64(msg.get(), RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE, value);
    nla_nest_end(msg.get(), entry);
  }
  nla_nest_end_keep_empty(msg.get(), table);  // the kernel's nla_nest_end keeps an empty nest
  return msg;
}

TEST(ParseRdmaStatReply, ReadsEveryCounterOfThePort) {
  Msg msg = StatReply(3, "mlx5_2", 1,
                      {{"out_of_sequence", 4294967290}, {"np_cnp_sent", 555}, {"rp_cnp_handled", 7}});
  auto parsed = ParseRdmaStatReply(nlmsg_hdr(msg.get()));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->device_index, 3u);
  EXPECT_EQ(parsed->port, 1u);
  EXPECT_EQ(parsed->counters, (RdmaCounters{{"out_of_sequence", 4294967290}, {"np_cnp_sent", 555}, {"rp_cnp_handled", 7}}));

  Msg padded = StatReply(3, "mlx5_2", 1, {{"np_ecn_marked_roce_packets", 1ULL << 40}}, /*pad=*/true);
  parsed = ParseRdmaStatReply(nlmsg_hdr(padded.get()));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->counters, (RdmaCounters{{"np_ecn_marked_roce_packets", 1ULL << 40}}));

  Msg none = StatReply(3, "mlx5_2", 1, {});
  parsed = ParseRdmaStatReply(nlmsg_hdr(none.get()));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->counters.empty());
}

TEST(ParseRdmaStatReply, RefusesWhatTheKernelNeverSends) {
  // Another command's reply.
  Msg device = NewMsg(kGet);
  nla_put_u32(device.get(), RDMA_NLDEV_ATTR_DEV_INDEX, 1);
  EXPECT_FALSE(ParseRdmaStatReply(nlmsg_hdr(device.get())).ok());

  // No port.
  Msg no_port = NewMsg(kStatGet);
  nla_put_u32(no_port.get(), RDMA_NLDEV_ATTR_DEV_INDEX, 1);
  nla_nest_end(no_port.get(), nla_nest_start(no_port.get(), RDMA_NLDEV_ATTR_STAT_HWCOUNTERS));
  EXPECT_FALSE(ParseRdmaStatReply(nlmsg_hdr(no_port.get())).ok());

  // No counter table at all.
  Msg no_table = NewMsg(kStatGet);
  nla_put_u32(no_table.get(), RDMA_NLDEV_ATTR_DEV_INDEX, 1);
  nla_put_u32(no_table.get(), RDMA_NLDEV_ATTR_PORT_INDEX, 1);
  EXPECT_FALSE(ParseRdmaStatReply(nlmsg_hdr(no_table.get())).ok());

  // An entry without its value, and one whose name is not terminated.
  for (int broken = 0; broken < 2; ++broken) {
    Msg msg = NewMsg(kStatGet);
    nla_put_u32(msg.get(), RDMA_NLDEV_ATTR_DEV_INDEX, 1);
    nla_put_u32(msg.get(), RDMA_NLDEV_ATTR_PORT_INDEX, 1);
    nlattr* table = nla_nest_start(msg.get(), RDMA_NLDEV_ATTR_STAT_HWCOUNTERS);
    nlattr* entry = nla_nest_start(msg.get(), RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY);
    if (broken == 0) {
      nla_put_string(msg.get(), RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, "out_of_sequence");
    } else {
      nla_put(msg.get(), RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, 4, "abcd");
      nla_put_u64(msg.get(), RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE, 1);
    }
    nla_nest_end(msg.get(), entry);
    nla_nest_end(msg.get(), table);
    EXPECT_FALSE(ParseRdmaStatReply(nlmsg_hdr(msg.get())).ok()) << broken;
  }

  // A value too short for a u64.
  Msg short_value = NewMsg(kStatGet);
  nla_put_u32(short_value.get(), RDMA_NLDEV_ATTR_DEV_INDEX, 1);
  nla_put_u32(short_value.get(), RDMA_NLDEV_ATTR_PORT_INDEX, 1);
  nlattr* table = nla_nest_start(short_value.get(), RDMA_NLDEV_ATTR_STAT_HWCOUNTERS);
  nlattr* entry = nla_nest_start(short_value.get(), RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY);
  nla_put_string(short_value.get(), RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, "x");
  nla_put_u32(short_value.get(), RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE, 1);
  nla_nest_end(short_value.get(), entry);
  nla_nest_end(short_value.get(), table);
  EXPECT_FALSE(ParseRdmaStatReply(nlmsg_hdr(short_value.get())).ok());

  EXPECT_FALSE(ParseRdmaStatReply(nullptr).ok());
}

TEST(ParseRdmaDeviceReply, ReadsIndexAndName) {
  Msg msg = NewMsg(kGet);
  nla_put_u32(msg.get(), RDMA_NLDEV_ATTR_DEV_INDEX, 7);
  nla_put_string(msg.get(), RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_7");
  nla_put_u32(msg.get(), RDMA_NLDEV_ATTR_PORT_INDEX, 1);  // the port count, in this reply
  auto device = ParseRdmaDeviceReply(nlmsg_hdr(msg.get()));
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->index, 7u);
  EXPECT_EQ(device->name, "mlx5_7");

  Msg nameless = NewMsg(kGet);
  nla_put_u32(nameless.get(), RDMA_NLDEV_ATTR_DEV_INDEX, 7);
  EXPECT_FALSE(ParseRdmaDeviceReply(nlmsg_hdr(nameless.get())).ok());
  Msg stat = StatReply(1, "mlx5_0", 1, {});
  EXPECT_FALSE(ParseRdmaDeviceReply(nlmsg_hdr(stat.get())).ok());
}

// The running kernel: this one may have no RDMA subsystem at all.
TEST(RdmaNetlinkSource, OnTheRunningKernel) {
  RdmaNetlinkSource source;
  if (!source.available()) {
    EXPECT_NE(source.unavailable_reason().find("NETLINK_RDMA"), std::string::npos);
    auto counters = source.HwCounters("mlx5_0", 1);
    EXPECT_TRUE(absl::IsUnavailable(counters.status())) << counters.status();
    GTEST_SKIP() << source.unavailable_reason()
                 << ": requests to a real kernel are not checked here, only the replies' format";
  }
  // A kernel with the RDMA core: a device it does not have is not found.
  auto counters = source.HwCounters("rocefab_no_such_dev", 1);
  EXPECT_TRUE(absl::IsNotFound(counters.status())) << counters.status();
}

// A source answering from a table, to check how the reader merges it with
// sysfs.
class TableSource final : public HwCounterSource {
 public:
  bool available() const override { return true; }
  absl::StatusOr<RdmaCounters> HwCounters(const std::string& device, uint32_t port) override {
    ++calls;
    if (fail) return absl::UnavailableError("refused");
    auto it = table.find(device + "/" + std::to_string(port));
    if (it == table.end()) return absl::NotFoundError("no such device");
    return it->second;
  }
  std::map<std::string, RdmaCounters> table;
  bool fail = false;
  int calls = 0;
};

TEST(RdmaSysfsReader, HwCountersComeFromNetlinkAndTheRestFromFiles) {
  testing::TempDir dir;
  testing::CopyTree(std::string(ROCEFAB_FIXTURES) + "/hosts/z1-r01-h1/sys", dir / "sys");
  FsRoot sysfs(dir / "sys");
  ReadHealth health;
  const std::vector<NicReading> from_files = RdmaSysfsReader(sysfs).ReadAll(&health, 1'000'000);
  ASSERT_FALSE(from_files.empty());
  const NicReading& file_nic = from_files.front();
  ASSERT_GT(file_nic.counters.count("out_of_sequence"), 0u);

  TableSource netlink;
  // Netlink has out_of_sequence moved on; it lacks cnp_sent, which stays
  // the file's.
  netlink.table[file_nic.device + "/" + std::to_string(file_nic.port)] = {
      {"out_of_sequence", file_nic.counters.at("out_of_sequence") + 1000}, {"some_driver_counter", 1}};
  RdmaSysfsReader reader(sysfs, &netlink);
  ReadHealth merged_health;
  const std::vector<NicReading> merged = reader.ReadAll(&merged_health, 2'000'000);
  ASSERT_EQ(merged.size(), from_files.size());
  const NicReading& nic = merged.front();
  EXPECT_EQ(nic.counters.at("out_of_sequence"), file_nic.counters.at("out_of_sequence") + 1000);
  if (file_nic.counters.count("cnp_sent")) EXPECT_EQ(nic.counters.at("cnp_sent"), file_nic.counters.at("cnp_sent"));
  EXPECT_EQ(nic.counters.at("rx_bytes"), file_nic.counters.at("rx_bytes")) << "counters/ is always sysfs";
  EXPECT_EQ(nic.counters.size(), file_nic.counters.size());
  EXPECT_EQ(reader.netlink_ports(), 1u);

  // A refused request: sysfs for that device, and no new request for 30 s.
  netlink.fail = true;
  const int calls = netlink.calls;
  const uint64_t failures = reader.netlink_failures();
  auto refused = reader.ReadAll(&merged_health, 3'000'000);
  EXPECT_EQ(refused.front().counters.at("out_of_sequence"), file_nic.counters.at("out_of_sequence"));
  EXPECT_EQ(netlink.calls - calls, 1) << "the other device, not found at 2 s, is not asked again yet";
  EXPECT_EQ(reader.netlink_failures(), failures + 1);
  const int after_failure = netlink.calls;
  reader.ReadAll(&merged_health, 20'000'000);
  EXPECT_EQ(netlink.calls, after_failure) << "not asked again within 30 s";
  netlink.fail = false;
  auto again = reader.ReadAll(&merged_health, 34'000'000);
  EXPECT_GT(netlink.calls, after_failure);
  EXPECT_EQ(again.front().counters.at("out_of_sequence"), file_nic.counters.at("out_of_sequence") + 1000);
}

}  // namespace
}  // namespace rocefab::hostd
