#pragma once
// A network driver's statistics behind the ethtool ioctl, for
// IoctlEthtoolSource's tests and benchmark: the commands' structures of
// <linux/ethtool.h>, answered as the kernel's net/ethtool/ioctl.c does.

#include <linux/ethtool.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace rocefab::testing {

// One device's driver: GSSET_INFO reports the set's size, GSTRINGS and
// GSTATS write the driver's whole set and its own count, whatever the
// caller asked for.
struct FakeEthtoolDriver {
  std::vector<std::string> names;
  std::vector<uint64_t> values;
  bool present = true;
  // Applied just before the next GSTATS: the set changing under a reader.
  std::function<void(FakeEthtoolDriver&)> before_next_stats;
  int name_calls = 0;

  void Add(const std::string& name, uint64_t value) {
    names.push_back(name);
    values.push_back(value);
  }
  uint64_t& Value(const std::string& name) {
    return values[std::find(names.begin(), names.end(), name) - names.begin()];
  }
  std::string device = "eth2";

  int operator()(const char* ifname, void* data) {
    if (!present || ifname != device) {
      errno = ENODEV;
      return -1;
    }
    uint32_t cmd = 0;
    std::memcpy(&cmd, data, sizeof(cmd));
    if (cmd == ETHTOOL_GSSET_INFO) {
      auto* info = static_cast<ethtool_sset_info*>(data);
      info->sset_mask &= 1ULL << ETH_SS_STATS;
      if (info->sset_mask != 0) info->data[0] = static_cast<uint32_t>(names.size());
      return 0;
    }
    if (cmd == ETHTOOL_GSTRINGS) {
      ++name_calls;
      auto* strings = static_cast<ethtool_gstrings*>(data);
      strings->len = static_cast<uint32_t>(names.size());
      for (size_t i = 0; i < names.size(); ++i)
        std::strncpy(reinterpret_cast<char*>(strings->data + i * ETH_GSTRING_LEN), names[i].c_str(),
                     ETH_GSTRING_LEN);
      return 0;
    }
    if (cmd == ETHTOOL_GSTATS) {
      if (before_next_stats) std::exchange(before_next_stats, nullptr)(*this);
      auto* stats = static_cast<ethtool_stats*>(data);
      stats->n_stats = static_cast<uint32_t>(values.size());
      std::memcpy(stats->data, values.data(), values.size() * sizeof(uint64_t));
      return 0;
    }
    errno = EOPNOTSUPP;
    return -1;
  }
};

// Part of an mlx5e port's set (drivers/net/ethernet/mellanox/mlx5/core/
// en_stats.c): software and per-channel statistics around the PFC ones.
inline void Mlx5LikeStatistics(FakeEthtoolDriver* d, int channels) {
  d->Add("rx_packets", 1000);
  d->Add("tx_packets", 2000);
  for (int ch = 0; ch < channels; ++ch) {
    d->Add("ch" + std::to_string(ch) + "_events", 10 + ch);
    d->Add("rx" + std::to_string(ch) + "_packets", 100 + ch);
  }
  d->Add("rx_discards_phy", 3);
  d->Add("rx_buffer_passed_thres_phy", 11);
  for (int prio = 0; prio < 8; ++prio) {
    d->Add("rx_prio" + std::to_string(prio) + "_pause", prio == 3 ? 42 : 0);
    d->Add("rx_prio" + std::to_string(prio) + "_pause_duration", prio == 3 ? 210 : 0);
    d->Add("tx_prio" + std::to_string(prio) + "_pause", prio == 3 ? 17 : 0);
    d->Add("tx_prio" + std::to_string(prio) + "_pause_duration", 0);
  }
  d->Add("tx_pause_storm_warning_events ", 4);
  d->Add("tx_pause_storm_error_events", 1);
  d->Add("link_down_events_phy", 2);
}

}  // namespace rocefab::testing
