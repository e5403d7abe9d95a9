#pragma once
// Ethernet statistics (the PFC and pause counters of docs/counters.md).
//
// Two sources behind one interface: the real SIOCETHTOOL ioctl
// (ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS, ETHTOOL_GSTATS), and text in
// `ethtool -S` output format read from DIR/<netdev>/statistics, which the lab
// and fixtures write.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
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
  // Called at the start of each poll, before the Reads of that poll.
  virtual void BeginPoll(int64_t /*now_us*/) {}
};

// The kernel's ioctl. Keeps one AF_INET datagram socket open.
class IoctlEthtoolSource final : public EthtoolSource {
 public:
  IoctlEthtoolSource();
  ~IoctlEthtoolSource() override;
  absl::StatusOr<EthtoolStats> Read(const std::string& netdev) override;

 private:
  int fd_ = -1;
};

// Files DIR/<netdev>/statistics in `ethtool -S` format, kept open between
// polls (common/file_cache.h), each directory checked with stat: the lab
// runs dozens of agents, and inotify instances are few (128 per user).
class TextEthtoolSource final : public EthtoolSource {
 public:
  explicit TextEthtoolSource(std::string dir)
      : root_(std::move(dir)), files_(root_, kRediscoverUs, /*watch=*/false) {}
  absl::StatusOr<EthtoolStats> Read(const std::string& netdev) override;
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
