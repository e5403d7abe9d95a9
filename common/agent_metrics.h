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
#include <memory>
#include <string>
#include <vector>

#include "common/agent_loop.h"
#include "common/telemetry_shipper.h"

namespace rocefab {

class AgentMetrics final : public prometheus::Collectable {
 public:
  // `components`: versions the agent sees, e.g. {"kernel", "6.1.0-18-amd64"},
  // {"mlx5_0 firmware", "28.39.1002"}. rocefab_build_info is not among
  // these series: every daemon serves BuildInfoCollectable itself.
  AgentMetrics(const AgentLoop& loop, const TelemetryShipper& shipper,
               std::map<std::string, std::string> components = {});
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const AgentLoop& loop_;
  const TelemetryShipper& shipper_;
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
