#include "common/agent_metrics.h"

#include <sys/utsname.h>

#include <limits>

#include "common/build_info.h"

namespace rocefab {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

ClientMetric Series(MetricType type, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  if (type == MetricType::Counter) metric.counter.value = value;
  else metric.gauge.value = value;
  return metric;
}

class CollectFunction final : public prometheus::Collectable {
 public:
  explicit CollectFunction(std::function<std::vector<MetricFamily>()> collect) : collect_(std::move(collect)) {}
  std::vector<MetricFamily> Collect() const override { return collect_(); }

 private:
  std::function<std::vector<MetricFamily>()> collect_;
};

}  // namespace

std::shared_ptr<prometheus::Collectable> CollectableOf(std::function<std::vector<MetricFamily>()> collect) {
  return std::make_shared<CollectFunction>(std::move(collect));
}

MetricFamily OneValue(const std::string& name, const std::string& help, MetricType type, double value) {
  return MetricFamily{name, help, type, {Series(type, {}, value)}};
}

MetricFamily ByLabel(const std::string& name, const std::string& help, MetricType type, const std::string& label,
                     const std::map<std::string, double>& values) {
  MetricFamily family{name, help, type, {}};
  for (const auto& [key, value] : values) family.metric.push_back(Series(type, {{label, key}}, value));
  return family;
}

std::shared_ptr<prometheus::Collectable> GaugeOf(std::string name, std::string help, std::function<double()> read) {
  return CollectableOf([name = std::move(name), help = std::move(help), read = std::move(read)] {
    return std::vector<MetricFamily>{OneValue(name, help, MetricType::Gauge, read())};
  });
}

std::shared_ptr<prometheus::Collectable> BuildInfoCollectable(const std::string& program) {
  return CollectableOf([program] {
    MetricFamily family{"rocefab_build_info", "The program, its version and the git commit it was built from",
                        MetricType::Gauge, {}};
    family.metric.push_back(
        Series(MetricType::Gauge, {{"commit", BuildCommit()}, {"program", program}, {"version", BuildVersion()}}, 1));
    return std::vector<MetricFamily>{std::move(family)};
  });
}

std::map<std::string, std::string> SystemComponents() {
  std::map<std::string, std::string> out;
  utsname names{};
  if (uname(&names) == 0) out["kernel"] = names.release;
  return out;
}

void SourceProblems::Add(const std::string& source, const Counts& counts) {
  std::lock_guard lock(mu_);
  Counts& c = counts_[source];
  c.skipped += counts.skipped;
  c.parse += counts.parse;
  c.failed += counts.failed;
}

std::map<std::string, SourceProblems::Counts> SourceProblems::Snapshot() const {
  std::lock_guard lock(mu_);
  return counts_;
}

AgentMetrics::AgentMetrics(const AgentLoop& loop, const TelemetryShipper& shipper, const SourceProblems& problems,
                           std::map<std::string, std::string> components)
    : loop_(loop), shipper_(shipper), problems_(problems), components_(std::move(components)) {}

std::vector<MetricFamily> AgentMetrics::Collect() const {
  std::vector<MetricFamily> out;
  MetricFamily components{"rocefab_agent_component_info",
                          "Software and firmware the agent sees, one series per component", MetricType::Gauge, {}};
  for (const auto& [component, version] : components_)
    components.metric.push_back(Series(MetricType::Gauge, {{"component", component}, {"version", version}}, 1));
  out.push_back(std::move(components));

  const AgentLoop::PollTimes times = loop_.poll_times();
  ClientMetric histogram;
  histogram.histogram.sample_count = times.polls;
  histogram.histogram.sample_sum = times.total_us / 1e6;
  for (size_t i = 0; i < AgentLoop::kPollBucketsUs.size(); ++i)
    histogram.histogram.bucket.push_back({times.buckets[i], AgentLoop::kPollBucketsUs[i] / 1e6});
  histogram.histogram.bucket.push_back({times.polls, std::numeric_limits<double>::infinity()});
  out.push_back(MetricFamily{"rocefab_agent_poll_duration_seconds", "How long each poll of the sources took",
                             MetricType::Histogram, {std::move(histogram)}});
  const auto counter = [&](const char* name, const char* help, double value) {
    out.push_back(OneValue(name, help, MetricType::Counter, value));
  };
  const auto gauge = [&](const char* name, const char* help, double value) {
    out.push_back(OneValue(name, help, MetricType::Gauge, value));
  };
  counter("rocefab_agent_poll_overruns_total", "Polls that took longer than the poll interval",
          static_cast<double>(times.overruns));
  gauge("rocefab_agent_poll_interval_seconds", "The configured poll interval", loop_.interval_us() / 1e6);
  const AgentLoop::PollTimes fast = loop_.fast_times();
  gauge("rocefab_agent_fast_poll_interval_seconds", "The PFC fast path's interval (0: off)",
        loop_.fast_interval_us() / 1e6);
  counter("rocefab_agent_fast_polls_total", "Fast-path polls of the PFC pause counters",
          static_cast<double>(fast.polls));
  counter("rocefab_agent_fast_poll_seconds_total", "Time spent in fast-path polls", fast.total_us / 1e6);
  counter("rocefab_agent_fast_poll_overruns_total", "Fast-path polls that took longer than the fast interval",
          static_cast<double>(fast.overruns));

  const TelemetryShipper::Stats s = shipper_.stats();
  MetricFamily family{"rocefab_agent_source_problems_total",
                      "What each source could not give, by kind: skipped (a value or table absent), parse (a value "
                      "that was not a number), source (the whole source failed in a poll)",
                      MetricType::Counter,
                      {}};
  for (const auto& [source, c] : problems_.Snapshot())
    for (const auto& [kind, value] : {std::pair{"skipped", c.skipped}, {"parse", c.parse}, {"source", c.failed}})
      family.metric.push_back(
          Series(MetricType::Counter, {{"kind", kind}, {"source", source}}, static_cast<double>(value)));
  out.push_back(std::move(family));
  gauge("rocefab_agent_stream_up", "1 while the telemetry stream to the collector is open", s.connected ? 1 : 0);
  counter("rocefab_agent_stream_failures_total", "Telemetry streams that broke or could not open",
          static_cast<double>(s.stream_failures));
  counter("rocefab_agent_batches_enqueued_total", "Batches built", static_cast<double>(s.enqueued));
  counter("rocefab_agent_batches_acked_total", "Batches the collector acknowledged as stored (or as duplicates)",
          static_cast<double>(s.acked_stored + s.acked_duplicate));
  counter("rocefab_agent_batches_rejected_total", "Batches the collector rejected as malformed",
          static_cast<double>(s.rejected));
  counter("rocefab_agent_batches_dropped_total", "Batches dropped because the queue was full",
          static_cast<double>(s.dropped_overflow));
  gauge("rocefab_agent_batches_pending", "Batches waiting for an acknowledgement", static_cast<double>(s.pending));
  gauge("rocefab_agent_batches_replay_pending", "Batches of an earlier run of the agent still to send",
        static_cast<double>(s.replay_pending));
  gauge("rocefab_agent_spool_bytes", "Bytes of unacknowledged batches kept on disk", static_cast<double>(s.spool_bytes));
  return out;
}

}  // namespace rocefab
