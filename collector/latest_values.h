#pragma once
// The latest value of every counter series, kept in memory for /metrics.
// Written by the Ingester after each commit, read by Prometheus scrapes.
// Thread-safe.

#include <prometheus/collectable.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "rocefab/v1/telemetry.pb.h"

namespace rocefab::collector {

class LatestValues final : public prometheus::Collectable {
 public:
  void Update(const v1::TelemetryBatch& batch);
  // Exposes NIC series as rocefab_nic_<name>{host,device,port[,prio]} per
  // docs/counters.md.
  std::vector<prometheus::MetricFamily> Collect() const override;
  size_t size() const;

 private:
  // (scope, entity, port, counter, prio, queue); -1 for absent labels.
  using Key = std::tuple<int, std::string, uint32_t, std::string, int64_t, int64_t>;
  struct Latest {
    uint64_t value = 0;
    int64_t timestamp_us = 0;
  };
  mutable std::mutex mu_;
  std::map<Key, Latest> values_;
};

}  // namespace rocefab::collector
