#pragma once
// The health gate's view of the fabric: the detectors' verdicts. After a
// wave, the gate fails when a detector opened an anomaly on an element the
// wave touched: a touched switch, one of its ports, or the NIC or port at
// the other end of one of its links. Counters alone do not fail a wave (a
// lossy queue drops by design; one FCS error is noise); the detectors'
// thresholds and lossless-class rules decide.

#include <memory>
#include <string>
#include <vector>

#include "common/topology.h"
#include "rocefab/v1/config.pb.h"
#include "rocefab/v1/query.grpc.pb.h"

namespace rocefab::controller {

class Gate {
 public:
  virtual ~Gate() = default;
  // Empty when the touched switches stayed healthy from `since_us` to
  // `until_us`; else what is wrong. The verdict waits until the detectors
  // have evaluated the switches' telemetry through `until_us`, so a loaded
  // collector delays a gate rather than passing it blind. A collector that
  // cannot be asked, or does not catch up, fails the gate.
  virtual std::string Verdict(const std::vector<std::string>& switches, int64_t since_us, int64_t until_us) = 0;
  // The running jobs (every shard's registry holds them all), so a drain
  // can name the jobs it touches. An error when no collector answers.
  virtual absl::StatusOr<std::vector<v1::Job>> RunningJobs() = 0;
  // The fabric's traffic matrix over `window_seconds`: every shard's part
  // (each measures the agents it holds), summed. An error when any shard
  // does not answer: a partial matrix would move traffic it cannot see.
  virtual absl::StatusOr<v1::TrafficMatrixResponse> TrafficMatrix(uint32_t window_seconds) = 0;
};

// The elements a wave touching `switches` can hurt: the switches, and the
// ends of their links. True when `entity` ("dev/port" or "dev") is one.
bool TouchedBy(const Topology& topology, const std::vector<std::string>& switches, const std::string& entity);

// Asks every collector shard (comma-separated addresses) for the anomalies
// active since the wave began.
class CollectorGate final : public Gate {
 public:
  CollectorGate(std::shared_ptr<const Topology> topology, const std::string& collectors,
                const v1::TlsSettings& tls);
  std::string Verdict(const std::vector<std::string>& switches, int64_t since_us, int64_t until_us) override;
  absl::StatusOr<std::vector<v1::Job>> RunningJobs() override;
  absl::StatusOr<v1::TrafficMatrixResponse> TrafficMatrix(uint32_t window_seconds) override;
  bool empty() const { return shards_.empty(); }

 private:
  struct Shard {
    std::string address;
    std::unique_ptr<v1::Query::Stub> stub;
  };
  std::shared_ptr<const Topology> topology_;
  std::vector<Shard> shards_;
};

}  // namespace rocefab::controller
