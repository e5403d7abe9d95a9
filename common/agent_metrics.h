#pragma once
// What rocefab-hostd and rocefab-switchd say about themselves on /metrics,
// as node_exporter does: build and component versions, how polls go, what
// the sources could not give, and the state of the stream to the collector.
// Read from the loop and the shipper when scraped (docs/metrics.md, "Agent
// self-metrics").

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "common/agent_loop.h"
#include "common/telemetry_shipper.h"

namespace rocefab {

// What each of an agent's sources could not give since the agent started,
// by kind: the labels of rocefab_agent_source_problems_total. Thread-safe:
// the poll thread adds, a scrape reads.
class SourceProblems final {
 public:
  struct Counts {
    uint64_t skipped = 0;  // a value or table absent
    uint64_t parse = 0;    // a value that was not a number
    uint64_t failed = 0;   // the whole source failed in a poll
  };
  void Add(const std::string& source, const Counts& counts);
  std::map<std::string, Counts> Snapshot() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, Counts> counts_;
};

class AgentMetrics final : public prometheus::Collectable {
 public:
  // `components`: versions the agent sees, e.g. {"kernel", "6.1.0-18-amd64"},
  // {"mlx5_0 firmware", "28.39.1002"}. rocefab_build_info is not among
  // these series: every daemon serves BuildInfoCollectable itself.
  // `problems`: what the agent's sources could not give, by source.
  AgentMetrics(const AgentLoop& loop, const TelemetryShipper& shipper, const SourceProblems& problems,
               std::map<std::string, std::string> components = {});
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const AgentLoop& loop_;
  const TelemetryShipper& shipper_;
  const SourceProblems& problems_;
  const std::map<std::string, std::string> components_;
};

// What every agent sees of its machine: {"kernel": uname's release}.
std::map<std::string, std::string> SystemComponents();

// rocefab_build_info{program, version, commit} 1, for every daemon.
std::shared_ptr<prometheus::Collectable> BuildInfoCollectable(const std::string& program);
// Families built at each scrape by `collect`.
std::shared_ptr<prometheus::Collectable> CollectableOf(std::function<std::vector<prometheus::MetricFamily>()> collect);
// One family of one series, or of one series per value of `label`.
prometheus::MetricFamily OneValue(const std::string& name, const std::string& help, prometheus::MetricType type,
                                  double value);
prometheus::MetricFamily ByLabel(const std::string& name, const std::string& help, prometheus::MetricType type,
                                 const std::string& label, const std::map<std::string, double>& values);
// A gauge whose value `read` gives at each scrape.
std::shared_ptr<prometheus::Collectable> GaugeOf(std::string name, std::string help, std::function<double()> read);

}  // namespace rocefab
