#pragma once
// Ethernet statistics (the PFC and pause counters of docs/counters.md).
//
// Two sources behind one interface: the real SIOCETHTOOL ioctl
// (ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS, ETHTOOL_GSTATS), and text in
// `ethtool -S` output format read from DIR/<netdev>/statistics, which the lab
// and fixtures write.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "agents/host/rdma_sysfs.h"

namespace rocefab::hostd {

using EthtoolStats = std::vector<std::pair<std::string, uint64_t>>;

class EthtoolSource {
 public:
  virtual ~EthtoolSource() = default;
  // All statistics of `netdev`, names trimmed. NotFound when there is no such
  // device, Unavailable when the driver does not answer.
  virtual absl::StatusOr<EthtoolStats> Read(const std::string& netdev) = 0;
  // The statistics the vocabulary knows, put into `nic` as
  // MapEthtoolStats(Read(netdev)) would, with the same errors; what a poll
  // calls. The sources below do it without building every statistic's name.
  virtual absl::Status ReadInto(const std::string& netdev, NicReading* nic);
  // Called at the start of each poll, before the Reads of that poll.
  virtual void BeginPoll(int64_t /*now_us*/) {}
};

// The kernel's ioctl. Keeps one AF_INET datagram socket open.
//
// A statistics set is a table of names (ETHTOOL_GSTRINGS) and one of values
// (ETHTOOL_GSTATS) in the same order. An mlx5 port has hundreds to
// thousands of statistics (per channel and per priority), of which the
// vocabulary wants about 40. ReadInto keeps, per device, which positions
// those are, and reads only the count (ETHTOOL_GSSET_INFO) and the values
// each poll. The names are read again when the count changes (a driver's set
// grows or shrinks with its channels and features), and every 30 s in any
// case, as a driver may rename statistics without changing their number.
class IoctlEthtoolSource final : public EthtoolSource {
 public:
  // The ioctl(SIOCETHTOOL) call for `ifname` with `data` (an ethtool
  // command structure); returns -1 with errno set on failure, as ioctl(2).
  using Ioctl = std::function<int(const char* ifname, void* data)>;
  IoctlEthtoolSource();
  // Calls `ioctl` in place of the kernel's.
  explicit IoctlEthtoolSource(Ioctl ioctl);
  ~IoctlEthtoolSource() override;
  absl::StatusOr<EthtoolStats> Read(const std::string& netdev) override;
  absl::Status ReadInto(const std::string& netdev, NicReading* nic) override;
  void BeginPoll(int64_t now_us) override { now_us_ = now_us; }

  // How many times a device's names were read, for ReadInto; each Read
  // reads them too.
  uint64_t name_reads() const { return name_reads_; }

 private:
  static constexpr int64_t kNamesMaxAgeUs = 30'000'000;
  // Where the vocabulary's statistics sit in one device's set.
  struct Layout {
    uint32_t count = 0;
    int64_t read_us = 0;
    struct Wanted {
      uint32_t index;
      const CounterDef* def;
      uint32_t prio;
    };
    std::vector<Wanted> wanted;
  };
  int Call(const std::string& netdev, void* data);
  absl::Status Error(const std::string& netdev, const char* what) const;
  absl::StatusOr<uint32_t> Count(const std::string& netdev);
  absl::Status Names(const std::string& netdev, uint32_t count);
  absl::Status Values(const std::string& netdev, uint32_t count);

  int fd_ = -1;
  Ioctl ioctl_;
  int64_t now_us_ = 0;
  uint64_t name_reads_ = 0;
  std::unordered_map<std::string, Layout> layouts_;
  std::vector<uint8_t> names_;   // ethtool_gstrings, reused
  std::vector<uint8_t> values_;  // ethtool_stats, reused
};

// Files DIR/<netdev>/statistics in `ethtool -S` format, kept open between
// polls (common/file_cache.h), each directory checked with stat: the lab
// runs dozens of agents, and inotify instances are few (128 per user).
class TextEthtoolSource final : public EthtoolSource {
 public:
  explicit TextEthtoolSource(std::string dir)
      : root_(std::move(dir)), files_(root_, kRediscoverUs, /*watch=*/false) {}
  absl::StatusOr<EthtoolStats> Read(const std::string& netdev) override;
  absl::Status ReadInto(const std::string& netdev, NicReading* nic) override;
  void BeginPoll(int64_t now_us) override { files_.BeginPoll(now_us); }

 private:
  static constexpr int64_t kRediscoverUs = 30'000'000;
  FsRoot root_;
  FileCache files_;
};

// Parses `ethtool -S` output:
//   NIC statistics:
//        rx_packets: 10
//        tx_prio3_pause: 7
// Lines that are not "name: integer" are counted in *bad_lines and skipped.
EthtoolStats ParseEthtoolText(std::string_view text, uint64_t* bad_lines);

// Moves the statistics the vocabulary knows into `nic` (pfc_*{prio},
// pause_storm_*, *_phy). Names are trimmed: one kernel prints
// "tx_pause_storm_warning_events ".
void MapEthtoolStats(const EthtoolStats& stats, NicReading* nic);

}  // namespace rocefab::hostd
