#pragma once
// The traffic matrix for centralized TE (query.proto TrafficMatrix,
// docs/controller.md "TE"). TrafficRates follows the byte counters of NICs
// and switch ports as batches are observed; BuildTrafficMatrix turns their
// rates over a window, the topology and the running jobs into bytes/s per
// (RTSW ingress port, destination rack).
//
// Counters say how fast a NIC sends, not to whom. The job's placement and
// its collectives say where the bytes go:
// - a job whose collective bytes in the window are mostly AllToAll sends
//   from each NIC to every other NIC of the job alike, so a NIC's bytes are
//   spread over the job's racks in proportion to its NICs there;
// - any other job runs rings (AllReduce, AllGather, ReduceScatter, as
//   NCCL's ring algorithm does across nodes): the job's hosts in rank
//   order, and NIC k of each host sends to the NIC of the same name on the
//   next host (rail-aligned rings, one per NIC);
// - a job with no collective records in the window is spread like
//   AllToAll, and the response says so: it claims no ring order it has not
//   seen.
// A collective moves the same bytes from every rank, so every NIC of a job
// is given the job's mean measured rate: one NIC slowed by a collision
// does not look like a smaller demand, and a NIC whose counters are
// missing still counts.

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/topology.h"
#include "rocefab/v1/diagnosis.pb.h"
#include "rocefab/v1/jobs.pb.h"
#include "rocefab/v1/query.pb.h"
#include "rocefab/v1/telemetry.pb.h"

namespace rocefab::collector {

class TrafficRates final {
 public:
  // Keeps `keep_us` of history per series, one point per `step_us` at most,
  // so that memory is bounded by series x keep/step whatever the poll rate.
  explicit TrafficRates(int64_t keep_us = 300'000'000, int64_t step_us = 5'000'000)
      : keep_us_(keep_us), step_us_(step_us) {}

  // Takes tx_bytes of NICs, rx_bytes, tx_bytes and link_up of switch ports.
  // Thread-safe.
  void Observe(const v1::TelemetryBatch& batch);

  // Bytes/s of `counter` on `entity` (summed over its ports) over the
  // `window_us` before its newest sample; nullopt when it has no two samples,
  // or its newest is older than half a window before `now_us`.
  std::optional<double> Rate(const std::string& entity, const std::string& counter, int64_t now_us,
                             int64_t window_us) const;
  // Switch ports whose newest link_up, within the window, is 0.
  std::vector<std::string> DownPorts(int64_t now_us, int64_t window_us) const;
  // The share of `job`'s collective bytes in the window that were AllToAll;
  // nullopt when it has no records there.
  std::optional<double> AllToAllShare(const std::string& job, int64_t now_us, int64_t window_us) const;

 private:
  struct Point {
    int64_t ts_us;
    double cumulative;  // the sum of deltas since the series was first seen
  };
  struct Series {
    std::vector<Point> points;  // oldest first
  };
  void Add(Series& series, int64_t ts_us, uint64_t delta);

  const int64_t keep_us_, step_us_;
  mutable std::mutex mu_;
  // (entity, counter) -> port -> series
  std::map<std::pair<std::string, std::string>, std::map<uint32_t, Series>> series_;
  std::map<std::string, std::pair<int64_t, uint64_t>> link_up_;  // port -> (ts, value)
  // job -> step-long bucket -> collective bytes {other ops, AllToAll}
  std::map<std::string, std::map<int64_t, std::array<double, 2>>> job_bytes_;
};

// The load of the rack uplinks (RTSW ports facing a CTSW) among `ports`, from
// their tx_bytes over the window: how many report, the busiest and the mean
// utilisation over those that carry traffic (above 1%).
struct UplinkLoad {
  size_t uplinks = 0, loaded = 0;
  double max_utilization = 0, mean_loaded_utilization = 0;
};
UplinkLoad RackUplinkLoad(const Topology& topology, const std::vector<std::string>& ports, const TrafficRates& rates,
                          int64_t now_us, int64_t window_us);

// The `job diagnose` hint for a degraded job with no cause whose rack
// uplinks are uneven (at least 4 carry traffic, the busiest 1.5x their mean
// or more): its flows likely collide in the hash, and the routing what-if
// compares schemes on its placement. Empty when that does not hold.
std::string ImbalanceHint(const v1::DiagnoseJobResponse& diagnosis, const UplinkLoad& load);

// The matrix from the rates over `window_us` ending at `now_us`.
v1::TrafficMatrixResponse BuildTrafficMatrix(const Topology& topology, const std::vector<v1::Job>& running_jobs,
                                             const TrafficRates& rates, int64_t now_us, int64_t window_us);

}  // namespace rocefab::collector
