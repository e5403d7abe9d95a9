#include "collector/detectors.h"

#include "common/findings.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <unordered_set>

#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/daemon_setup.h"
#include "common/stats.h"
#include "common/strings.h"
#include "common/topology.h"

namespace rocefab::collector {
namespace {

std::string Key(v1::Scope scope, const std::string& entity) {
  return StrCat(static_cast<char>('0' + scope), entity);
}

std::string SeriesKey(const v1::Sample& s) {
  if (s.has_prio()) return StrCat(s.counter(), "#", s.prio());
  if (s.has_queue()) return StrCat(s.counter(), "@", s.queue());
  return s.counter();
}

std::string Pct(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * share);
  return buf;
}

std::string Num(double v) {
  char buf[32];
  if (std::fabs(v) >= 1e9) std::snprintf(buf, sizeof buf, "%.1fG", v / 1e9);
  else if (std::fabs(v) >= 1e6) std::snprintf(buf, sizeof buf, "%.1fM", v / 1e6);
  else if (std::fabs(v) >= 1e4) std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

int TierOf(const Topology* topology, const std::string& device) {
  if (topology == nullptr) return 9;
  if (topology->FindHost(device) != nullptr) return 0;
  if (const v1::TopoSwitch* sw = topology->FindSwitch(device)) return 1 + static_cast<int>(sw->role());
  return 9;
}

// A link from `device` to `peer_device` is one of `device`'s uplinks: both
// are switches, the peer of a higher tier.
bool FacesUp(const Topology* topology, const std::string& device, const std::string& peer_device) {
  const int tier = TierOf(topology, device), peer_tier = TierOf(topology, peer_device);
  return tier >= 1 && peer_tier > tier && peer_tier < 9;
}

std::string SizeBucket(const std::string& op, uint64_t bytes) {
  int log2 = 0;
  while ((bytes >> log2) > 1 && log2 < 63) ++log2;
  return StrCat(op, "/2^", log2);
}

// A congested lossless queue stays congested until it falls below this
// share of deep_queue_bytes (hysteresis: a queue that ECN holds near the
// threshold would otherwise enter and leave at every read).
constexpr double kCongestedExitShare = 0.25;

// Drops on a lossless queue while the switch's buffer pools stay below
// this share of their size are a threshold setting, not exhaustion: a
// shared-buffer switch gives one congested queue far more than this before
// it must drop (a dynamic threshold of alpha 1 alone allows half the pool).
constexpr double kThresholdDropFill = 0.5;

// ECMP imbalance: a congested uplink (its lossless queue marks ECN or is
// deep) is a collision, not a lack of capacity, when it carries at least
// this many times the mean of its switch's uplinks: spread evenly, the same
// traffic would take a third off it. Rates are averaged over the poll
// interval, so a bursty collective's saturated uplink reads far below line
// rate: the ratio and the queue tell, not the absolute rate.
constexpr double kUplinkImbalance = 1.5;

// "2.3x"
std::string Ratio(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fx", r);
  return buf;
}

constexpr const char* kLossCounters[] = {"out_of_sequence", "packet_seq_errors", "local_ack_timeouts",
                                         "retransmits"};

}  // namespace

absl::StatusOr<DetectorSettings> ResolveDetectorSettings(const v1::DetectorConfig& c) {
  DetectorSettings s;
  std::string errors;
  auto ratio = [&](const char* name, double value, double* out, bool allow_one) {
    if (value == 0) return;
    if (value < 0 || value > 1 || (!allow_one && value == 1))
      StrAppend(&errors, "detectors.", name, " must be between 0 and 1\n");
    else *out = value;
  };
  auto duration = [&](const char* name, bool has, const google::protobuf::Duration& d, int64_t* out) {
    if (!has) return;
    const int64_t us = DurationToUs(d);
    if (us <= 0) StrAppend(&errors, "detectors.", name, " must be positive\n");
    else *out = us;
  };
  if (!c.lossless_priorities().empty()) {
    s.lossless_priorities.clear();
    for (uint32_t p : c.lossless_priorities()) {
      if (p > 7) StrAppend(&errors, "detectors.lossless_priorities: ", p, " is not a priority 0-7\n");
      s.lossless_priorities.insert(p);
    }
  }
  ratio("pause_ratio", c.pause_ratio(), &s.pause_ratio, false);
  ratio("storm_ratio", c.storm_ratio(), &s.storm_ratio, true);
  ratio("buffer_high_ratio", c.buffer_high_ratio(), &s.buffer_high_ratio, true);
  ratio("busbw_drop", c.busbw_drop(), &s.busbw_drop, false);
  ratio("straggler_p", c.straggler_p(), &s.straggler_p, false);
  if (c.regression_llr() < 0) StrAppend(&errors, "detectors.regression_llr must be positive\n");
  else if (c.regression_llr() > 0) s.regression_llr = c.regression_llr();
  ratio("degraded_speed_ratio", c.degraded_speed_ratio(), &s.degraded_speed_ratio, false);
  if (s.storm_ratio < s.pause_ratio)
    StrAppend(&errors, "detectors.storm_ratio must not be below pause_ratio\n");
  if (c.link_error_min()) s.link_error_min = c.link_error_min();
  if (c.silent_loss_min()) s.silent_loss_min = c.silent_loss_min();
  if (c.buffer_pool_bytes()) s.buffer_pool_bytes = c.buffer_pool_bytes();
  if (c.deep_queue_bytes()) s.deep_queue_bytes = c.deep_queue_bytes();
  if (c.baseline_intervals()) s.baseline_intervals = c.baseline_intervals();
  if (c.lossless_drop_min()) s.lossless_drop_min = c.lossless_drop_min();
  duration("stall_after", c.has_stall_after(), c.stall_after(), &s.stall_after_us);
  duration("clear_after", c.has_clear_after(), c.clear_after(), &s.clear_after_us);
  duration("evaluate_every", c.has_evaluate_every(), c.evaluate_every(), &s.evaluate_every_us);
  duration("stale_after", c.has_stale_after(), c.stale_after(), &s.stale_after_us);
  duration("flap_window", c.has_flap_window(), c.flap_window(), &s.flap_window_us);
  duration("collective_window", c.has_collective_window(), c.collective_window(),
           &s.collective_window_us);
  duration("storm_pause", c.has_storm_pause(), c.storm_pause(), &s.storm_pause_us);
  if (!errors.empty()) {
    errors.pop_back();
    return absl::InvalidArgumentError(errors);
  }
  return s;
}

// The port at the other end of `port`'s link; empty without a topology or
// a link.
std::string PeerPort(const Topology* topology, const std::string& port) {
  if (topology == nullptr) return "";
  const int link = topology->LinkOfPort(port);
  return link < 0 ? "" : topology->PeerOf(link, port);
}

std::string CanonicalLinkEnd(const Topology* topology, const std::string& port) {
  const std::string peer = PeerPort(topology, port);
  if (peer.empty()) return port;
  const int mine = TierOf(topology, EntityDevice(port)), theirs = TierOf(topology, EntityDevice(peer));
  if (mine != theirs) return mine < theirs ? port : peer;
  return std::min(port, peer);
}

Detectors::Detectors(DetectorSettings settings) : s_(std::move(settings)) {}

void Detectors::Observe(const v1::TelemetryBatch& batch) {
  if (!batch.components().empty())
    components_.Observe(batch.agent_id(), {batch.components().begin(), batch.components().end()}, batch.created_us());
  for (const v1::EntitySamples& es : batch.entities()) {
    if (es.scope() == v1::SCOPE_UNSPECIFIED || es.scope() == v1::SCOPE_COLL) continue;
    key_.assign(1, static_cast<char>('0' + es.scope()));
    key_ += es.entity();
    EntityState& e = entities_[key_];
    const int64_t last_us = std::max(e.ts_us, e.fast_ts_us);
    // A replayed or reordered reading. A full reading may share its time
    // with the last fast one: an agent whose source stamps its own readings
    // (the lab's files, a switch's counter snapshot) read the same snapshot
    // twice, fast and then in full.
    if (es.fast() ? es.timestamp_us() <= last_us
                  : es.timestamp_us() <= e.ts_us || es.timestamp_us() < e.fast_ts_us)
      continue;
    const double since_us = last_us > 0 ? static_cast<double>(std::max<int64_t>(0, es.timestamp_us() - last_us)) : 0;
    e.scope = es.scope();
    e.entity = es.entity();
    if (es.fast()) {
      // Only the pause counters: the full reading's series stay, and the
      // deltas wait for the next full reading.
      e.fast_ts_us = es.timestamp_us();
      for (const v1::Sample& sample : es.samples()) {
        if (!sample.has_delta()) continue;
        e.fast_pending[SeriesKey(sample)] += static_cast<double>(sample.delta());
        // The NIC's stall prevention fired: judged at once, as a run that
        // reached storm_pause is.
        if (sample.delta() > 0 && sample.counter() == "pause_storm_warnings")
          e.fast_storm_warnings += static_cast<double>(sample.delta()), urgent_ = true;
        if (sample.delta() > 0 && sample.counter() == "pause_storm_errors")
          e.fast_storm_errors += static_cast<double>(sample.delta()), urgent_ = true;
      }
      TrackUnbroken(e, es, since_us, es.previous_us() > last_us ? es.previous_us() : 0, /*fast=*/true);
      continue;
    }
    TrackUnbroken(e, es, since_us, 0, /*fast=*/false);
    e.before_prev_ts_us = e.prev_ts_us;
    e.prev_ts_us = e.ts_us;
    e.ts_us = es.timestamp_us();
    // A reading replaces the last one; series it lacks are no longer known.
    // The same series in the same order as last time (the usual case) reuse
    // their slots without building a key per sample.
    bool same = e.shape.size() == static_cast<size_t>(es.samples_size());
    for (int i = 0; same && i < es.samples_size(); ++i) {
      const v1::Sample& sample = es.samples(i);
      const EntityState::ShapeEntry& s = e.shape[static_cast<size_t>(i)];
      same = s.counter == sample.counter() &&
             s.prio == (sample.has_prio() ? static_cast<int64_t>(sample.prio()) : -1) &&
             s.queue == (sample.has_queue() ? static_cast<int64_t>(sample.queue()) : -1);
    }
    if (!same) {
      e.series.clear();
      e.shape.clear();
      for (const v1::Sample& sample : es.samples())
        e.shape.push_back({sample.counter(), sample.has_prio() ? static_cast<int64_t>(sample.prio()) : -1,
                           sample.has_queue() ? static_cast<int64_t>(sample.queue()) : -1,
                           &e.series[SeriesKey(sample)]});
    }
    for (int i = 0; i < es.samples_size(); ++i) {
      const v1::Sample& sample = es.samples(i);
      Reading& r = *e.shape[static_cast<size_t>(i)].slot;
      r.value = static_cast<double>(sample.value());
      r.has_delta = sample.has_delta();
      r.delta = static_cast<double>(sample.delta());
    }
    for (const auto& [series, delta] : e.fast_pending)
      if (auto it = e.series.find(series); it != e.series.end() && it->second.has_delta) it->second.delta += delta;
    e.fast_pending.clear();
    e.fast_storm_warnings = e.fast_storm_errors = 0;
  }
  for (const v1::CollectiveRecord& rec : batch.collectives()) {
    if (rec.job().empty()) continue;
    JobState& job = jobs_[rec.job()];
    const int64_t ts = rec.timestamp_us();
    job.records.push_back({ts, rec.comm(), rec.rank(), rec.n_ranks(), rec.host().empty() ? batch.agent_id() : rec.host(),
                           rec.op(), rec.bytes(), rec.seq(), rec.busbw_gbs(), rec.exec_time_us()});
    job.newest_us = std::max(job.newest_us, ts);
    if (job.first_us == 0 || ts < job.first_us) job.first_us = ts;
  }
}

void Detectors::TrackUnbroken(EntityState& e, const v1::EntitySamples& es, double since_us, int64_t read_before_us,
                              bool fast) {
  // The pause since the counter last grew, for at least this share of that
  // time, continues a run. (The counter and the reading's timestamp are a
  // few ms apart at most; a counter that the hardware refreshes in steps
  // grows once per step, by the whole step.) A shorter pause in a reading
  // interval shorter than storm_pause may lie at its end and starts one,
  // which only unbroken intervals after it can take to storm_pause; in a
  // longer interval it proves nothing.
  constexpr double kUnbrokenShare = 0.95;
  if (fast) e.fast_tx_ratio = e.fast_rx_ratio = 0;
  // The counters were as their last samples at read_before_us: what grew,
  // grew after it.
  if (read_before_us > 0) since_us = std::min(since_us, static_cast<double>(es.timestamp_us() - read_before_us));
  if (since_us <= 0) return;
  for (const v1::Sample& sample : es.samples()) {
    if (!sample.has_prio() || sample.prio() >= e.unbroken_us.size() || !s_.lossless_priorities.count(sample.prio()))
      continue;
    if (sample.counter() == "pfc_rx_pause_us") {
      if (fast && sample.has_delta())
        e.fast_rx_ratio =
            std::max(e.fast_rx_ratio, std::min(since_us, static_cast<double>(sample.delta())) / since_us);
      continue;
    }
    if (sample.counter() != "pfc_tx_pause_us") continue;
    double& run = e.unbroken_us[sample.prio()];
    int64_t& moved_us = e.pause_moved_us[sample.prio()];
    const double before = run;
    const double grew = sample.has_delta() ? static_cast<double>(sample.delta()) : 0;
    const double span = moved_us > 0 ? static_cast<double>(es.timestamp_us() - moved_us) : since_us;
    const double paused = std::min(since_us, grew);
    run = grew > 0 && grew >= kUnbrokenShare * span        ? run + grew
          : since_us < static_cast<double>(s_.storm_pause_us) ? paused
                                                              : 0;
    if (grew > 0) moved_us = es.timestamp_us();
    if (fast) {
      e.fast_tx_ratio = std::max(e.fast_tx_ratio, paused / since_us);
      const double threshold = static_cast<double>(s_.storm_pause_us);
      if (before < threshold && run >= threshold) urgent_ = true;
    }
  }
}

double Detectors::Unbroken(const EntityState& e) const {
  double longest = 0;
  for (double run : e.unbroken_us) longest = std::max(longest, run);
  return longest;
}

bool Detectors::Fresh(const EntityState& e, int64_t now_us) const {
  return e.prev_ts_us > 0 && now_us - e.ts_us <= s_.stale_after_us;
}

double Detectors::IntervalUs(const EntityState& e) const {
  return static_cast<double>(std::max<int64_t>(1, e.ts_us - e.prev_ts_us));
}

const Detectors::Reading* Detectors::Find(const EntityState& e, std::string_view key) const {
  static const Reading kUnknown{};
  auto id = key_ids_.find(key);
  if (id == key_ids_.end()) id = key_ids_.emplace(std::string(key), key_ids_.size()).first;
  if (e.memo_ts != e.ts_us) {
    e.memo.assign(key_ids_.size(), &kUnknown);
    e.memo_ts = e.ts_us;
  } else if (e.memo.size() < key_ids_.size()) {
    e.memo.resize(key_ids_.size(), &kUnknown);
  }
  const Reading*& memo = e.memo[id->second];
  if (memo == &kUnknown) {
    auto it = e.series.find(id->first);
    memo = it == e.series.end() ? nullptr : &it->second;
  }
  return memo;
}

double Detectors::Delta(const EntityState& e, std::string_view key) const {
  const Reading* r = Find(e, key);
  return r != nullptr && r->has_delta ? r->delta : 0;
}

Detectors::Summed Detectors::SumSeries(const EntityState& e, std::string_view counter) const {
  Summed sum;
  for (const auto& [key, r] : e.series) {
    if (!key.starts_with(counter)) continue;
    sum.found = true;
    sum.value += r.value;
    if (r.has_delta) sum.delta += r.delta;
  }
  return sum;
}

double Detectors::LosslessDelta(const EntityState& e, const char* counter) const {
  auto it = lossless_keys_.find(std::string_view(counter));
  if (it == lossless_keys_.end()) {
    std::vector<std::string> keys;
    for (uint32_t p : s_.lossless_priorities) keys.push_back(StrCat(counter, "#", p));
    it = lossless_keys_.emplace(counter, std::move(keys)).first;
  }
  double sum = 0;
  for (const std::string& key : it->second) sum += Delta(e, key);
  return sum;
}

v1::Evidence Detectors::Ev(const EntityState& e, const std::string& counter, double delta,
                           double rate, std::string note) const {
  v1::Evidence ev;
  ev.set_entity(e.entity);
  ev.set_counter(counter);
  // Each reading's delta is counted once, however often it is evaluated.
  ev.set_total(e.ts_us > e.consumed_ts_us ? delta : 0);
  ev.set_peak_rate(rate);
  ev.set_note(std::move(note));
  return ev;
}

bool Detectors::PeersReadSince(const Topology* topo, const std::string& device, int64_t ts_us) const {
  if (topo == nullptr) return true;
  for (const std::string& name : topo->PortsOf(device)) {
    const std::string peer = PeerPort(topo, StrCat(device, "/", name));
    if (peer.empty()) continue;
    for (const v1::Scope scope : {v1::SCOPE_PORT, v1::SCOPE_NIC})
      if (const auto it = entities_.find(Key(scope, peer)); it != entities_.end() && it->second.ts_us < ts_us)
        return false;
  }
  return true;
}

void Detectors::DetectPorts(int64_t now_us, const FabricContext& context, std::vector<Hit>* hits) {
  const Topology* topo = context.topology.get();
  own_congested_.clear();
  struct Pause {
    const EntityState* e;
    double tx = 0, rx = 0, storm_events = 0;
    double stall_errors = 0;      // its stall prevention timed out in the interval
    double rx_discards = 0;       // ... and what it dropped since, for want of pausing
    bool stall_dropping = false;  // EntityState::stall_dropping
    double unbroken_us = 0;  // the longest lossless pause without a break
    bool unbroken = false;   // ... reached storm_pause
    double fast_tx = 0;      // tx pause share of a fast reading newer than the full one
  };
  std::vector<Pause> pauses;
  // Devices with a port whose egress is being paused, and congested egress
  // queues per device: what explains a device pausing its own senders.
  std::unordered_map<std::string, std::vector<std::string>> device_paused;
  struct Deep {
    const EntityState* e;
    double depth = 0, marks = 0, packets = 0;
    bool marks_known = false;  // the agent reports the queue's mark counter
  };
  std::unordered_map<std::string, std::vector<Deep>> device_deep;
  std::unordered_map<std::string, double> port_rx;  // entity -> rx pause ratio
  // Switches with a lossless egress queue congested (with hysteresis).
  std::unordered_set<std::string> device_congested;
  // Drops on lossless queues, judged once every pool has been read.
  struct Drop {
    const EntityState* e;
    uint32_t q;
    double drops, packets, depth;  // depth -1: not reported
  };
  std::vector<Drop> lossless_drops;
  // Ports and NICs that report PFC off on a lossless priority, by device.
  struct PfcOff {
    const EntityState* e;
    uint32_t q;
  };
  std::map<std::string, std::vector<PfcOff>> device_pfc_off;
  std::vector<std::pair<uint32_t, std::string>> pfc_keys;
  for (uint32_t q : s_.lossless_priorities) pfc_keys.emplace_back(q, StrCat("pfc_enabled#", q));
  // Switch -> its fullest buffer pool's peak use, as a share of its size.
  std::unordered_map<std::string, double> device_pool_fill;
  // Switch -> its uplinks (ports facing a higher tier) and the share of
  // line rate each sent in the interval.
  struct Uplink {
    const EntityState* e;
    double util;
  };
  std::unordered_map<std::string, std::vector<Uplink>> device_uplinks;
  // Switch -> the links toward it from the tier above (ports of the
  // switches above), the same way.
  std::unordered_map<std::string, std::vector<Uplink>> device_downlinks;
  // Egress queues that were congested in the interval: a lossless queue
  // that marked ECN, or is deep.
  std::unordered_set<std::string> queue_congested;
  // Egress queues held deep (deep_queue_bytes, with the hysteresis of
  // congested_prios) on a lossless priority: their depth now, and the
  // share of packets they marked in the interval.
  struct Full {
    double depth = 0, marked = 0;
  };
  std::unordered_map<std::string, Full> queue_full;
  // Link speeds per device, for ports that came up slow before the
  // collector ever saw them fast.
  std::unordered_map<std::string, std::vector<double>> device_rates;
  for (const auto& [key, e] : entities_)
    if (Fresh(e, now_us))
      if (const Reading* r = Find(e, "rate_bytes_per_second"); r != nullptr && r->value > 0)
        device_rates[StrCat(static_cast<char>('0' + e.scope), EntityDevice(e.entity))].push_back(r->value);

  for (auto& [key, e] : entities_) {
    if (!Fresh(e, now_us)) continue;
    const double interval_us = IntervalUs(e);
    const double interval_s = interval_us / 1e6;
    if (e.scope == v1::SCOPE_NIC || e.scope == v1::SCOPE_PORT) {
      Pause p{&e};
      p.tx = std::min(1.0, LosslessDelta(e, "pfc_tx_pause_us") / interval_us);
      p.rx = std::min(1.0, LosslessDelta(e, "pfc_rx_pause_us") / interval_us);
      p.stall_errors = Delta(e, "pause_storm_errors");
      p.storm_events = Delta(e, "pause_storm_warnings") + p.stall_errors;
      p.rx_discards = Delta(e, "rx_discards_phy");
      if (e.ts_us > e.consumed_ts_us) e.stall_dropping = p.stall_errors > 0 || (e.stall_dropping && p.rx_discards > 0);
      p.stall_dropping = e.stall_dropping && p.rx_discards > 0;
      // Fast readings newer than the full one: the pause a port causes is
      // judged only by its unbroken runs (a share of 100 ms is too short a
      // window for pause_ratio and storm_ratio); how much it is paused is
      // a consequence, not a cause, and its freshest view explains most.
      if (e.fast_ts_us > e.ts_us) {
        p.fast_tx = e.fast_tx_ratio;
        p.rx = std::max(p.rx, e.fast_rx_ratio);
        p.stall_errors += e.fast_storm_errors;
        p.storm_events += e.fast_storm_warnings + e.fast_storm_errors;
      }
      p.unbroken_us = Unbroken(e);
      p.unbroken = p.unbroken_us >= static_cast<double>(s_.storm_pause_us);
      if (p.tx >= s_.pause_ratio || p.rx >= s_.pause_ratio || p.storm_events > 0 || p.unbroken || p.stall_dropping)
        pauses.push_back(p);
      port_rx[e.entity] = p.rx;
      for (const auto& [q, on_key] : pfc_keys)
        if (const Reading* on = Find(e, on_key); on != nullptr && on->value == 0)
          device_pfc_off[EntityDevice(e.entity)].push_back({&e, q});
      // Any real pause received counts as a reason to relay one: pause
      // levels smear over a tree's hops within one interval.
      if (p.rx >= s_.pause_ratio / 5) device_paused[EntityDevice(e.entity)].push_back(e.entity);

      // Link state: down, flapping, slow, corrupting.
      const std::string link = CanonicalLinkEnd(topo, e.entity);
      const double downs = e.scope == v1::SCOPE_NIC ? std::max(Delta(e, "link_downed"), Delta(e, "link_down_events"))
                                                    : Delta(e, "link_flaps");
      if (downs > 0 && e.ts_us > e.consumed_ts_us) e.downs.push_back(e.ts_us);
      while (!e.downs.empty() && e.downs.front() < now_us - s_.flap_window_us) e.downs.pop_front();
      const Reading* up = Find(e, "link_up");
      const bool is_down = up != nullptr && up->value == 0;
      if (e.downs.size() >= 2) {
        Hit h{"link_flap", link, v1::SEVERITY_CRITICAL, std::min(1.0, e.downs.size() / 5.0),
              e.downs.front()};
        h.evidence.push_back(Ev(e, e.scope == v1::SCOPE_NIC ? "link_downed" : "link_flaps", downs, downs / interval_s,
                                StrCat(e.downs.size(), " downs in the flap window")));
        h.summary = StrCat("link ", link, " went down ", e.downs.size(), " times within ",
                           s_.flap_window_us / 1'000'000, " s", is_down ? " and is down now" : "");
        // A flapping link stays suspect for a while after its last down.
        h.clear_after_us = std::max(s_.clear_after_us, s_.flap_window_us / 4);
        hits->push_back(std::move(h));
      } else if (is_down) {
        Hit h{"link_down", link, v1::SEVERITY_CRITICAL, 1.0, e.ts_us - static_cast<int64_t>(interval_us)};
        h.evidence.push_back(Ev(e, "link_up", 0, 0, "carrier lost"));
        h.summary = StrCat("link ", link, " is down (seen from ", e.entity, ")");
        hits->push_back(std::move(h));
      }
      if (const Reading* rate = Find(e, "rate_bytes_per_second"); rate != nullptr && rate->value > 0 && !is_down) {
        e.max_rate = std::max(e.max_rate, rate->value);
        double nominal = e.max_rate;
        const auto& siblings = device_rates[StrCat(static_cast<char>('0' + e.scope), EntityDevice(e.entity))];
        if (siblings.size() >= 3) nominal = std::max(nominal, Median(siblings));
        if (rate->value < s_.degraded_speed_ratio * nominal) {
          Hit h{"link_degraded", link, v1::SEVERITY_CRITICAL, 1 - rate->value / nominal,
                e.ts_us - static_cast<int64_t>(interval_us)};
          h.evidence.push_back(Ev(e, "rate_bytes_per_second", 0, rate->value,
                                  StrCat("nominal ", Num(nominal * 8), "b/s")));
          h.summary = StrCat("link ", link, " runs at ", Num(rate->value * 8), "b/s instead of ",
                             Num(nominal * 8), "b/s");
          hits->push_back(std::move(h));
        }
      }
      if (e.scope == v1::SCOPE_PORT && !is_down)
        if (const Reading* rate = Find(e, "rate_bytes_per_second"); rate != nullptr && rate->value > 0)
          if (const std::string peer = PeerPort(topo, e.entity); !peer.empty()) {
            const std::string device = EntityDevice(e.entity);
            const int tier = TierOf(topo, device), peer_tier = TierOf(topo, EntityDevice(peer));
            if (FacesUp(topo, device, EntityDevice(peer)))
              device_uplinks[device].push_back({&e, Delta(e, "tx_bytes") / interval_s / rate->value});
            else if (tier >= 2 && tier < 9 && peer_tier >= 1 && peer_tier < tier)
              device_downlinks[EntityDevice(peer)].push_back({&e, Delta(e, "tx_bytes") / interval_s / rate->value});
          }
      double errors = 0;
      std::vector<v1::Evidence> error_ev;
      static constexpr const char* kNicErrors[] = {"symbol_errors", "rx_icrc_errors"};
      static constexpr const char* kPortErrors[] = {"rx_fcs_errors", "rx_symbol_errors"};
      for (const char* c : e.scope == v1::SCOPE_NIC ? kNicErrors : kPortErrors) {
        const double d = Delta(e, c);
        if (d > 0) error_ev.push_back(Ev(e, c, d, d / interval_s));
        // Symbol errors come in bursts per bad frame; FCS (or ICRC) counts frames.
        errors = std::max(errors, d);
      }
      if (errors >= static_cast<double>(s_.link_error_min)) {
        const double packets = Delta(e, "rx_packets");
        Hit h{"link_errors", link, v1::SEVERITY_CRITICAL,
              packets > 0 ? std::min(1.0, 1e4 * errors / packets) : 1.0, e.ts_us - static_cast<int64_t>(interval_us)};
        h.evidence = std::move(error_ev);
        h.summary = StrCat("corrupted frames on link ", link, ": ", Num(errors / interval_s),
                           "/s at ", e.entity, packets > 0 ? StrCat(" (", errors / packets * 1e6, " per million)") : "");
        hits->push_back(std::move(h));
      }
      if (e.scope == v1::SCOPE_NIC) {
        double loss = 0;
        std::vector<v1::Evidence> loss_ev;
        for (const char* c : kLossCounters) {
          const double d = Delta(e, c);
          if (d > 0) loss_ev.push_back(Ev(e, c, d, d / interval_s));
          loss += d;
        }
        if (loss >= static_cast<double>(s_.silent_loss_min)) {
          Hit h{"silent_loss", e.entity, v1::SEVERITY_WARNING, std::min(1.0, loss / interval_s / 1e4),
                e.ts_us - static_cast<int64_t>(interval_us)};
          h.evidence = std::move(loss_ev);
          h.summary = StrCat(e.entity, " sees RDMA loss: ", Num(loss / interval_s),
                             " out-of-sequence, sequence-error, timeout and retransmit events/s");
          hits->push_back(std::move(h));
        }
      }
    } else if (e.scope == v1::SCOPE_QUEUE) {
      for (uint32_t q : s_.lossless_priorities) {
        const std::string at = StrCat("@", q);
        const Reading* depth = Find(e, "queue_depth_bytes" + at);
        const double packets = Delta(e, "queue_tx_packets" + at);
        const double marks = Delta(e, "queue_ecn_marked_packets" + at);
        const double drops = Delta(e, "queue_drops" + at);
        if (marks > 0 || (depth != nullptr && depth->value >= static_cast<double>(s_.deep_queue_bytes))) {
          queue_congested.insert(e.entity);
          Congested& c = own_congested_.try_emplace(e.entity, Congested{&e}).first->second;
          c.marks += marks, c.packets += packets;
        }
        if (depth != nullptr && q < 32) {
          const uint32_t bit = 1u << q;
          if (depth->value >= static_cast<double>(s_.deep_queue_bytes)) e.congested_prios |= bit;
          else if (depth->value < kCongestedExitShare * static_cast<double>(s_.deep_queue_bytes))
            e.congested_prios &= ~bit;
          if (e.congested_prios & bit) {
            device_congested.insert(EntityDevice(e.entity));
            Full& f = queue_full[e.entity];
            f.depth = std::max(f.depth, depth->value);
            if (packets > 0) f.marked = std::max(f.marked, marks / packets);
          }
        }
        if (depth != nullptr && depth->value >= static_cast<double>(s_.deep_queue_bytes) && packets > 0)
          device_deep[EntityDevice(e.entity)].push_back(
              {&e, depth->value, marks, packets, Find(e, "queue_ecn_marked_packets" + at) != nullptr});
        if (drops >= static_cast<double>(s_.lossless_drop_min))
          lossless_drops.push_back({&e, q, drops, packets, depth != nullptr ? depth->value : -1});
      }
      // Buffer pools: entities "<switch>/<pool>" without a queue label.
      if (const Reading* used = Find(e, "buffer_used_bytes")) {
        const Reading* size = Find(e, "buffer_size_bytes");
        const double pool = size != nullptr && size->value > 0 ? size->value
                                                                : static_cast<double>(s_.buffer_pool_bytes);
        if (pool > 0) {
          // The fullest the pool was: its watermark since the last read
          // where the agent reports one, else its occupancy now.
          const Reading* mark = Find(e, "buffer_watermark_bytes");
          const double peak = std::max(used->value, mark != nullptr ? mark->value : 0.0);
          auto [it, fresh] = device_pool_fill.try_emplace(EntityDevice(e.entity), peak / pool);
          if (!fresh) it->second = std::max(it->second, peak / pool);
        }
        if (pool > 0 && used->value >= s_.buffer_high_ratio * pool) {
          Hit h{"buffer_high", e.entity, v1::SEVERITY_WARNING, used->value / pool,
                e.ts_us - static_cast<int64_t>(interval_us)};
          h.evidence.push_back(Ev(e, "buffer_used_bytes", 0, used->value, StrCat("pool ", Num(pool), "B")));
          h.summary = StrCat("buffer pool ", e.entity, " at ", Pct(used->value / pool), " of ", Num(pool), "B");
          hits->push_back(std::move(h));
        }
      }
    }
  }

  // Congested on their own account: not held by pauses from downstream.
  for (auto it = own_congested_.begin(); it != own_congested_.end();) {
    const auto rx = port_rx.find(it->first);
    it = rx != port_rx.end() && rx->second >= s_.pause_ratio / 5 ? own_congested_.erase(it) : std::next(it);
  }

  // ECMP imbalance: a switch whose busiest uplink is saturated while its
  // uplinks on average are far below it. Flows collided on some uplinks
  // while others had room: the hash, not the capacity, limits them. Not
  // judged where a link of the switch or of a switch its uplinks reach is
  // down or flapping (routing around a bad link moves load legitimately),
  // where one of the group's links is slow (it queues for its speed; a slow
  // link elsewhere moves nothing), nor where a switch its uplinks reach
  // drops on a lossless queue (the flows through it stall). The same
  // for the links toward a switch from the tier above: the hashes of the
  // switches upstream chose among them, and flows to one rack can collide
  // on one spine's link to it while the other spines' links have room.
  struct Imbalance {
    std::string key;       // the hit's
    bool uplinks = false;  // the switch's own uplinks collide
    bool toward = false;   // the links toward it from the tier above do
    // (Neither: its own parallel links toward a switch below do.)
  };
  std::unordered_map<std::string, Imbalance> device_imbalance;
  std::unordered_map<std::string, std::string> toward_imbalance;  // link toward a colliding switch -> the hit's key
  // Switch of the tier above -> the collision whose congested uplinks lead
  // into it: the links it sends on toward a switch below carry what those
  // uplinks hashed onto it.
  std::unordered_map<std::string, std::string> uplinks_into;
  // Switch -> the collision its own egress takes part in: its collided
  // uplinks, or its links toward a switch the flows from its tier collide
  // on. What a switch paused by it relays.
  std::unordered_map<std::string, std::string> device_collision;
  std::unordered_map<std::string, CollisionSeen> collision_seen;  // this evaluation's collision_seen_
  // Switch whose uplinks are all full, and link toward a switch whose links
  // from the tier above are: the oversubscription finding's key; and each
  // such finding's links.
  std::unordered_map<std::string, std::string> device_oversubscribed, toward_oversubscribed;
  std::unordered_map<std::string, std::vector<std::string>> oversubscribed_ports;
  std::unordered_set<std::string> collision_pending;             // congested links of a collision not yet lasting
  {
    // A link between switches that is down or flapping moves load, on its
    // switches and on those that route around it (routes withdrawn); a
    // host's link moves none (its rack's prefix stays where it was, and the
    // host's flows stop rather than take another uplink); a slow one queues
    // at its own ends (a queue that drains slowly is not a collision) but
    // moves nothing, since hashing is not weighted by speed; one that
    // corrupts frames stays in the ECMP group and carries what it carried.
    std::unordered_set<std::string> link_rerouted, link_faulted;
    std::unordered_set<std::string> link_moved;  // a switch with a link down or flapping: its routes moved
    std::unordered_set<std::string> slow_ends;   // both ends of a slow link
    // A lossless queue that drops makes the RoCE flows through it stall in
    // go-back-N: the links that lead to its switch carry less while it
    // lasts, because of the loss, not of the hash.
    for (const Drop& d : lossless_drops) link_rerouted.insert(EntityDevice(d.e->entity));
    for (const Hit& h : *hits)
      if (h.kind == "link_down" || h.kind == "link_flap" || h.kind == "link_degraded") {
        const std::string peer = PeerPort(topo, h.entity);
        const bool host_link =
            TierOf(topo, EntityDevice(h.entity)) == 0 || (!peer.empty() && TierOf(topo, EntityDevice(peer)) == 0);
        for (const std::string& device : {EntityDevice(h.entity), peer.empty() ? std::string() : EntityDevice(peer)}) {
          if (device.empty()) continue;
          link_faulted.insert(device);
          if (h.kind != "link_degraded" && !host_link) link_rerouted.insert(device), link_moved.insert(device);
        }
        if (h.kind == "link_degraded") {
          slow_ends.insert(h.entity);
          if (!peer.empty()) slow_ends.insert(peer);
        }
      }
    // Congested on its own account: a link held by pauses from the switch
    // it feeds queues because that switch cannot drain, not because flows
    // collided on it.
    auto own_congestion = [&](const Uplink& u) {
      const auto rx = port_rx.find(u.e->entity);
      return queue_congested.count(u.e->entity) && (rx == port_rx.end() || rx->second < s_.pause_ratio / 5);
    };
    // Whether what was seen on a group of links under `seen_key` has
    // lasted: every link of the group read again after the readings that
    // first showed it. Records this evaluation's sighting; once it has
    // lasted, `*start_us` goes back to the first sighting's start.
    auto lasted = [&](const std::string& seen_key, const std::vector<Uplink>& ups, int64_t* start_us) {
      int64_t oldest = std::numeric_limits<int64_t>::max(), newest = 0;
      for (const Uplink& u : ups) oldest = std::min(oldest, u.e->ts_us), newest = std::max(newest, u.e->ts_us);
      const auto seen = collision_seen_.find(seen_key);
      const CollisionSeen first = seen != collision_seen_.end() ? seen->second : CollisionSeen{newest, *start_us};
      collision_seen[seen_key] = first;
      if (seen == collision_seen_.end() || oldest <= first.newest_us) return false;
      *start_us = std::min(*start_us, first.start_us);
      return true;
    };
    // `device`'s group of links: its uplinks (`toward` false: ports of
    // `device`) or the links toward it (`toward` true: ports of the
    // switches above it).
    auto judge = [&](const std::string& device, std::vector<Uplink>& ups, bool toward) {
      if (ups.size() < 2 || link_moved.count(device)) return;
      // A slow link of the group queues for its speed; one elsewhere on the
      // switch moves nothing onto the group.
      for (const Uplink& u : ups)
        if (slow_ends.count(u.e->entity)) return;
      std::sort(ups.begin(), ups.end(), [](const Uplink& a, const Uplink& b) { return a.util > b.util; });
      bool near_fault = false, near_moved = false;
      double sum = 0;
      for (const Uplink& u : ups) {
        sum += u.util;
        // Uplinks: the switches they reach. Links toward the switch: the
        // switches that send on them, whose routes a fault changes.
        const std::string other = toward ? EntityDevice(u.e->entity) : EntityDevice(PeerPort(topo, u.e->entity));
        near_fault |= link_rerouted.count(other) > 0;
        near_moved |= link_moved.count(other) > 0;
      }
      // Loss near the group (flows stalled in go-back-N) changes what its
      // links carry, not where the hashes put the flows: routes did not
      // move. A collision already open holds, unjudged, while a link it
      // named still queues on its own account; its loads, distorted by the
      // loss, neither confirm nor clear it. (A generated run, seed 53 run
      // 81: PFC went off on a rack switch, a CTSW dropped, the collision
      // toward another rack closed on the distorted loads, and the link it
      // had named, as deep as before, came back as a hot spot.) A link down
      // or flapping moves routes: there, the collision is judged afresh.
      if (near_fault && !near_moved) {
        // The collisions open on the group: named by the switch the links
        // lead to, or by the switches above whose parallel links they are
        // (each its own).
        std::vector<std::string> owners = {device};
        if (toward)
          for (const Uplink& u : ups)
            if (const std::string sender = EntityDevice(u.e->entity);
                std::find(owners.begin(), owners.end(), sender) == owners.end())
              owners.push_back(sender);
        for (const std::string& owner : owners) {
          const auto open = active_.find(StrCat("ecmp_imbalance|", owner));
          if (open == active_.end()) continue;
          if (owner != device) {
            bool ours = false;  // its evidence is links of this group, not the switch's uplinks
            for (const v1::Evidence& ev : open->second.anomaly.evidence())
              for (const Uplink& link : ups) ours |= ev.entity() == link.e->entity;
            if (!ours) continue;
          }
          const std::string key = open->first;
          if (auto im = device_imbalance.find(owner); im != device_imbalance.end() && !im->second.key.empty())
            continue;
          const v1::Anomaly& was = open->second.anomaly;
          for (const Uplink& u : ups) {
            if (!own_congestion(u)) continue;
            bool named = false;
            for (const v1::Evidence& ev : was.evidence()) named |= ev.entity() == u.e->entity;
            if (!named) continue;
            Hit h{was.kind(), owner, was.severity(), was.magnitude(), was.start_us()};
            h.summary = was.summary();
            Imbalance& im = device_imbalance[owner];
            im.uplinks |= !toward;
            im.toward |= toward && owner == device;
            im.key = key;
            if (toward)
              for (const Uplink& link : ups)
                if (owner == device || EntityDevice(link.e->entity) == owner) toward_imbalance[link.e->entity] = key;
            device_collision.try_emplace(toward ? EntityDevice(u.e->entity) : device, key);
            hits->push_back(std::move(h));
            break;
          }
        }
        return;
      }
      const double mean = sum / static_cast<double>(ups.size());
      // The busiest congested link: two links can carry the same load while
      // only one of them queues (its share of the collision arrives in
      // bursts), and the one that queues is the collision.
      const Uplink* hottest = nullptr;
      for (const Uplink& u : ups)
        if (own_congestion(u)) {
          hottest = &u;
          break;
        }
      if (near_fault || mean <= 0 || hottest == nullptr || hottest->util < kUplinkImbalance * mean) return;
      const Uplink* coldest = &ups.back();
      // The links toward a switch are read by the switches above it, each
      // at its own moments, so their rates compare less well than one
      // switch's uplinks do (a job starting inside one reading and before
      // another): the room the others had must show in their queues too.
      // Every link of the group queued: too little capacity, not a
      // collision.
      if (toward && (link_faulted.count(EntityDevice(hottest->e->entity)) || queue_congested.count(coldest->e->entity)))
        return;
      // Links toward a switch that one switch above has in parallel are
      // chosen among by that switch's own hash, after the hashes upstream
      // brought the flows to it. Where a congested link is far above the
      // group's mean and far above the mean of its sender's own links, the
      // placement went wrong at that sender (a skewed ECMP group, or its
      // hash colliding the flows): a finding names it and its links, one
      // per such sender. (Generated runs: seed 62 run 7, a CTSW hashing
      // onto 2 of its 8 links toward a rack switch was named by the rack
      // switch; seed 66 run 76, a second CTSW colliding on its links toward
      // the same rack switch as a first was judged by no one, and its
      // congested link came up as a hot spot with no origin.)
      struct Sender {
        double sum = 0;
        size_t links = 0;
        const Uplink* busiest = nullptr;  // congested
        const Uplink* least = nullptr;    // ups runs busiest first
      };
      std::map<std::string, Sender> senders;
      if (toward)
        for (const Uplink& u : ups) {
          Sender& s = senders[EntityDevice(u.e->entity)];
          s.sum += u.util;
          ++s.links;
          if (s.busiest == nullptr && own_congestion(u)) s.busiest = &u;
          s.least = &u;
        }
      std::set<std::string> parallel_owners;
      for (const auto& [name, s] : senders)
        if (s.links >= 2 && s.busiest != nullptr && s.busiest->util >= kUplinkImbalance * mean &&
            s.busiest->util >= kUplinkImbalance * s.sum / static_cast<double>(s.links) && !link_faulted.count(name))
          parallel_owners.insert(name);
      auto name = [&](const Uplink& u) { return toward ? u.e->entity : u.e->entity.substr(device.size() + 1); };
      // One finding: `owner`'s (the switch itself, or a sender above it),
      // its busiest congested link `top`, judged against `base`.
      auto emit = [&](const std::string& owner, const Uplink& top, double base, const Uplink& least, size_t group) {
        const double interval_us = IntervalUs(*top.e);
        Hit h{"ecmp_imbalance", device, v1::SEVERITY_INFO, std::min(1.0, (top.util / mean - 1) / 2),
              top.e->ts_us - static_cast<int64_t>(interval_us)};
        {
          // And it lasts: a job starting or stopping between the readings of
          // two switches shows one group's links hot and the other's idle for
          // one reading each, and loss beyond an uplink empties it a reading
          // before the switch that drops reports it. A collision holds once
          // every link of the group was read again after the readings that
          // first showed it.
          // A collision among one sender's parallel links is the sender's,
          // seen afresh: the same links, named by the switch below until the
          // sender's own spread went uneven, had their own first sighting
          // (a generated run, seed 64 run 51: a CTSW's skew at 31 s took the
          // start of a collision toward an RTSW open since the job's start,
          // and was ranked as older than the slowdown it caused).
          const std::string seen_key = owner != device ? StrCat(owner, "|toward ", device)
                                       : toward        ? device
                                                       : StrCat(device, "|uplinks");
          if (!lasted(seen_key, ups, &h.start_us)) {
            for (const Uplink& u : ups)
              if (own_congestion(u)) collision_pending.insert(u.e->entity);
            return;
          }
        }
        const bool parallel = owner != device;
        h.entity = owner;
        h.magnitude = std::min(1.0, (top.util / base - 1) / 2);
        const std::string key = StrCat(h.kind, "|", h.entity);
        std::vector<std::string> hot;
        Imbalance& im = device_imbalance[owner];
        im.uplinks |= !toward;
        im.toward |= toward && !parallel;
        // The links of the group that are its: a sender's own, or (the
        // switch's) those of no sender named for its own.
        auto its = [&](const Uplink& u) {
          const std::string sender = EntityDevice(u.e->entity);
          return parallel ? sender == owner : !parallel_owners.count(sender);
        };
        for (const Uplink& u : ups) {
          if (u.util < kUplinkImbalance * base) break;
          if (!own_congestion(u) || (toward && !its(u))) continue;
          hot.push_back(name(u));
          device_collision.try_emplace(toward ? EntityDevice(u.e->entity) : device, key);
          if (!toward)
            if (const std::string peer = PeerPort(topo, u.e->entity); !peer.empty())
              uplinks_into.try_emplace(EntityDevice(peer), key);
          const double bytes = Delta(*u.e, "tx_bytes");
          h.evidence.push_back(Ev(
              *u.e, "tx_bytes", bytes, bytes / (interval_us / 1e6),
              parallel ? StrCat("congested link toward ", device, " at ", Ratio(u.util / base), " the mean of ", owner,
                                "'s links toward it")
              : toward ? StrCat("congested link toward ", device, " at ", Ratio(u.util / mean),
                                " the mean of the links toward it")
                       : StrCat("congested uplink at ", Ratio(u.util / mean), " the mean of the switch's uplinks")));
        }
        if (toward)
          for (const Uplink& u : ups)
            if (its(u)) toward_imbalance[u.e->entity] = key;
        const std::string what =
            parallel ? StrCat(hot.size(), " of ", owner, "'s ", group, " parallel links toward ", device)
            : toward ? StrCat(hot.size(), " of the ", group, " links toward ", device, " from the tier above")
                     : StrCat(hot.size(), " of ", group, " uplinks of ", device);
        h.summary = StrCat("flows collide on ", what, " (", absl::StrJoin(hot, ", "), " congested, the busiest at ",
                           Ratio(top.util / base), " the mean load and the least loaded ", name(least), " at ",
                           Ratio(least.util / base), " in the latest reading) while no link is faulty: ",
                           parallel ? StrCat(owner, "'s ECMP placed the traffic unevenly over its parallel links")
                                    : "ECMP placed the traffic unevenly");
        // A switch whose uplinks and the links toward it both collide: one
        // finding, with both groups' evidence.
        if (!im.key.empty()) {
          AddOrAbsorb(std::move(h), hits);
          return;
        }
        // Flows collide on the links toward a switch because the switches
        // upstream hashed them onto one spine. Where one of those switches
        // has its own uplinks colliding into the spine whose link toward
        // this one is the hottest, that is where the placement went wrong:
        // this collision is its consequence, whichever was seen first.
        if (toward && !parallel) {
          const std::string spine = EntityDevice(top.e->entity);
          const std::string* feeder = nullptr;
          if (auto into = uplinks_into.find(spine); into != uplinks_into.end()) {
            feeder = &into->second;
          } else if (auto earlier = uplinks_into_.find(spine);
                     earlier != uplinks_into_.end() && active_.count(earlier->second)) {
            // A collision still open whose uplinks went unjudged this round
            // (a reading not yet renewed) still feeds that spine.
            feeder = &earlier->second;
          }
          if (feeder != nullptr && *feeder != key) h.cause_key = *feeder;
        }
        im.key = key;
        hits->push_back(std::move(h));
      };
      for (const std::string& owner : parallel_owners) {
        const Sender& s = senders.at(owner);
        emit(owner, *s.busiest, s.sum / static_cast<double>(s.links), *s.least, s.links);
      }
      // The collision the hashes upstream made, where the busiest link's
      // sender spread its own evenly.
      if (!toward || !parallel_owners.count(EntityDevice(hottest->e->entity)))
        emit(device, *hottest, mean, *coldest, ups.size());
    };
    for (auto& [device, ups] : device_uplinks) judge(device, ups, false);
    for (auto& [device, links] : device_downlinks) judge(device, links, true);
    // Oversubscription: every link of a group held deep at once, on its own
    // account (not paused from the far end), with no fault near and no
    // collision among them. However ECMP spread the flows, the group was
    // offered more than it carries: the tier above is short of capacity for
    // this traffic (a job across zones on a CTSW's uplinks to the ATSWs).
    // Its queues fill while ECN marks at its ceiling and the switch pauses
    // its senders. Not a hot spot (no one queue stands out) nor a collision
    // (no link has room). It must last as a collision must, for the same
    // reasons.
    auto oversubscribed = [&](const std::string& device, const std::vector<Uplink>& ups, bool toward) {
      if (ups.size() < 2 || link_faulted.count(device)) return;
      if (toward) {
        if (std::any_of(ups.begin(), ups.end(), [&](const Uplink& u) { return toward_imbalance.count(u.e->entity) > 0; }))
          return;
      } else if (const auto im = device_imbalance.find(device);
                 im != device_imbalance.end() && (im->second.uplinks || im->second.toward)) {
        return;
      }
      double depth = 0, marked = 0, sum = 0;
      for (const Uplink& u : ups) {
        const auto full = queue_full.find(u.e->entity);
        if (full == queue_full.end() || !own_congestion(u) || collision_pending.count(u.e->entity)) return;
        const std::string sender = EntityDevice(u.e->entity), peer = PeerPort(topo, u.e->entity);
        if (link_rerouted.count(toward ? sender : EntityDevice(peer)) || (toward && link_faulted.count(sender)))
          return;
        depth += full->second.depth;
        marked = std::max(marked, full->second.marked);
        sum += u.util;
      }
      const double n = static_cast<double>(ups.size());
      const Uplink* first = &ups.front();
      const double interval_us = IntervalUs(*first->e);
      Hit h{"oversubscription", device, v1::SEVERITY_INFO,
            std::min(1.0, depth / n / (4.0 * static_cast<double>(s_.deep_queue_bytes))),
            first->e->ts_us - static_cast<int64_t>(interval_us)};
      if (!lasted(StrCat(device, toward ? "|toward-full" : "|uplinks-full"), ups, &h.start_us)) {
        for (const Uplink& u : ups) collision_pending.insert(u.e->entity);
        return;
      }
      std::vector<std::string>& ports = oversubscribed_ports[h.Key()];
      for (const Uplink& u : ups) {
        const Full& full = queue_full[u.e->entity];
        const double bytes = Delta(*u.e, "tx_bytes");
        h.evidence.push_back(Ev(*u.e, "tx_bytes", bytes, bytes / (interval_us / 1e6),
                                StrCat("queue ", Num(full.depth), "B deep, ", Pct(full.marked), " of packets marked, at ",
                                       Ratio(sum > 0 ? u.util * n / sum : 1), " the group's mean load")));
        ports.push_back(u.e->entity);
        (toward ? toward_oversubscribed[u.e->entity] : device_oversubscribed[device]) = h.Key();
      }
      // How much the switch can take in against what it can send on, by
      // the topology's link speeds.
      double below = 0, above = 0;
      if (!toward && topo != nullptr)
        for (const std::string& port : topo->PortsOf(device)) {
          const std::string full = StrCat(device, "/", port);
          const int link = topo->LinkOfPort(full);
          const std::string peer = PeerPort(topo, full);
          if (link < 0 || peer.empty()) continue;
          const double speed = topo->proto().links(link).speed_gbps();
          if (FacesUp(topo, device, EntityDevice(peer))) above += speed;
          else if (TierOf(topo, EntityDevice(peer)) < TierOf(topo, device)) below += speed;
        }
      h.summary = StrCat(toward ? StrCat("every one of the ", ups.size(), " links toward ", device, " from the tier above")
                                : StrCat("every one of the ", ups.size(), " uplinks of ", device),
                         " is congested (queues ", Num(depth / n), "B deep on average, up to ", Pct(marked),
                         " of packets marked) while no link is faulty and none has room: more traffic is offered to "
                         "the group than it carries, however ECMP spreads it",
                         above > 0 && below > above
                             ? StrCat("; the switch has ", Num(below * 1e9), "b/s of links below and ", Num(above * 1e9),
                                      "b/s above, ", Ratio(below / above), " oversubscribed")
                             : "");
      // A switch whose uplinks and the links toward it are both full (a
      // CTSW under traffic across zones, both ways): one finding.
      AddOrAbsorb(std::move(h), hits);
    };
    for (auto& [device, ups] : device_uplinks) oversubscribed(device, ups, false);
    for (auto& [device, links] : device_downlinks) oversubscribed(device, links, true);
    collision_seen_ = std::move(collision_seen);
    for (auto it = uplinks_into_.begin(); it != uplinks_into_.end();)
      it = active_.count(it->second) ? std::next(it) : uplinks_into_.erase(it);
    for (auto& [spine, key] : uplinks_into) uplinks_into_[spine] = std::move(key);
  }

  // Drops on a lossless queue. PFC should pause the sender before the class
  // drops. A queue that drops while its switch's shared buffer stays below
  // half full, while PFC is on for its priority and no storm holds the
  // port, dropped at a threshold far below what the buffer could give it:
  // a queue or buffer threshold setting, not a lack of buffer. Otherwise
  // (the buffer full, PFC off there, a storm the watchdog drops, or no pool
  // reading) PFC is not protecting the class.
  //
  // PFC off on a lossless priority, as a port or NIC reports its own
  // setting: that class drops there instead of pausing. A setting needs no
  // traffic to be wrong, so it is named whether or not anything dropped
  // yet. Several ports of one device name the device (its profile), as for
  // ECN. Drops on the device are its consequence, and on the device at the
  // other end of one of those links, on the queues what the port would not
  // hold back flows into: any but those back to its own switch (the link's
  // own and any parallel one), and, where the port is on
  // the tier above, only those facing down (what comes from above goes
  // down). Unless a threshold setting already explained them before PFC
  // went off. (A generated run blamed a CTSW port with PFC off for the
  // drops of a buffer threshold on the RTSW below, on the RTSW's uplinks.)
  std::unordered_map<std::string, std::string> pfc_off_cause;  // device, or a port of a peer -> the finding's entity
  for (const auto& [device, offs] : device_pfc_off) {
    std::set<std::string> ports;
    for (const PfcOff& o : offs) ports.insert(o.e->entity);
    const std::string entity = ports.size() >= 2 ? device : offs[0].e->entity;
    Hit h{"pfc_misconfig", entity, v1::SEVERITY_CRITICAL, 1.0, 0};
    std::set<uint32_t> prios;
    for (const PfcOff& o : offs) {
      const int64_t start = o.e->ts_us - static_cast<int64_t>(IntervalUs(*o.e));
      h.start_us = h.start_us == 0 ? start : std::min(h.start_us, start);
      h.evidence.push_back(Ev(*o.e, "pfc_enabled", 0, 0, StrCat("priority ", o.q, " is lossless; PFC is off")));
      prios.insert(o.q);
    }
    std::string prio_list;
    for (uint32_t q : prios) StrAppend(&prio_list, prio_list.empty() ? "" : ",", q);
    h.summary = StrCat(ports.size(), " port(s) of ", device, " have PFC off on lossless priority ", prio_list,
                       ": they neither pause their link partners nor obey their pauses, so the class drops "
                       "instead of pausing");
    pfc_off_cause[device] = entity;
    for (const std::string& port : ports) {
      const std::string peer = PeerPort(topo, port);
      if (peer.empty() || topo->FindSwitch(EntityDevice(peer)) == nullptr) continue;
      const std::string peer_device = EntityDevice(peer);
      const bool from_above = FacesUp(topo, peer_device, device);
      for (const std::string& name : topo->PortsOf(peer_device)) {
        const std::string queue = StrCat(peer_device, "/", name);
        const std::string next = PeerPort(topo, queue);
        // Nothing it lets through goes back to its own switch, over this
        // link or a parallel one.
        if (queue == peer || (!next.empty() && EntityDevice(next) == device)) continue;
        if (from_above && (next.empty() || FacesUp(topo, peer_device, EntityDevice(next)))) continue;
        pfc_off_cause.try_emplace(queue, entity);
      }
    }
    hits->push_back(std::move(h));
  }
  // While a reading taken when the setting was last off can still be
  // fresh, its counters may cover time it was off.
  for (const auto& [device, entity] : pfc_off_cause) pfc_off_seen_[device] = {entity, now_us};
  std::erase_if(pfc_off_seen_, [&](const auto& seen) { return now_us - seen.second.last_us > s_.stale_after_us; });
  for (const auto& [device, seen] : pfc_off_seen_) pfc_off_cause.try_emplace(device, seen.entity);
  std::unordered_map<std::string, std::vector<const Drop*>> threshold_drops;  // by switch
  // When an open finding began; 0 when none is open.
  auto open_since = [&](const std::string& key) -> int64_t {
    const auto it = active_.find(key);
    return it == active_.end() ? 0 : it->second.anomaly.start_us();
  };
  for (const Drop& d : lossless_drops) {
    const std::string device = EntityDevice(d.e->entity);
    const auto fill = device_pool_fill.find(device);
    auto pfc_off = pfc_off_cause.find(device);
    if (pfc_off == pfc_off_cause.end()) pfc_off = pfc_off_cause.find(d.e->entity);
    if (pfc_off != pfc_off_cause.end()) {
      // Drops already judged a threshold setting before PFC went off on
      // their switch or next to it stay one: a cause that began after them
      // does not explain them.
      int64_t threshold = 0;
      for (const std::string& key : {StrCat("buffer_threshold_drops|", d.e->entity),
                                     StrCat("buffer_threshold_drops|", device)})
        if (const int64_t since = open_since(key); since != 0) threshold = threshold == 0 ? since : std::min(threshold, since);
      const int64_t cause = open_since(StrCat("pfc_misconfig|", pfc_off->second));
      if (threshold != 0 && (cause == 0 || threshold < cause)) pfc_off = pfc_off_cause.end();
    }
    bool pfc_known_off = pfc_off != pfc_off_cause.end();
    for (const v1::SwitchStatus& st : context.switch_status)
      if (st.switch_name() == device && st.has_applied_qos() && !st.applied_qos().pfc_priorities().empty())
        pfc_known_off |= std::find(st.applied_qos().pfc_priorities().begin(), st.applied_qos().pfc_priorities().end(),
                                   d.q) == st.applied_qos().pfc_priorities().end();
    // Held by a storm: the PFC watchdog acting on the port (detected more
    // often than restored) drops what it will not let the pauses hold. A
    // port paused, however much, by a peer that is merely congested still
    // fills toward XOFF to pause its own senders: a drop on the way there,
    // the buffer mostly free, is the threshold's. Where the switch reports
    // no watchdog, a peer pausing the port in the storm class may be one.
    bool held = false, watchdog = false;
    if (auto port = entities_.find(Key(v1::SCOPE_PORT, d.e->entity)); port != entities_.end()) {
      const Summed detected = SumSeries(port->second, "pfcwd_storms_detected");
      watchdog = detected.found;
      held = detected.value > SumSeries(port->second, "pfcwd_storms_restored").value;
    }
    if (const auto rx = port_rx.find(d.e->entity); !watchdog && rx != port_rx.end())
      held = rx->second >= s_.storm_ratio;
    if (fill != device_pool_fill.end() && fill->second < kThresholdDropFill && !pfc_known_off && !held) {
      // A threshold only once the devices at the other ends of the
      // switch's links have been read since these drops were: a sender
      // with PFC off explains them too, and two devices' readings of one
      // moment reach the collector apart (a generated run, seed 48 run 10,
      // called a storm-held RTSW queue's drops a threshold 110 ms before
      // the CTSW above it, read at the same moment, reported PFC off).
      // Not beyond one interval: a peer that stopped reporting does not
      // hold the finding back.
      if (now_us - d.e->ts_us < static_cast<int64_t>(IntervalUs(*d.e)) && !PeersReadSince(topo, device, d.e->ts_us))
        continue;
      threshold_drops[device].push_back(&d);
      continue;
    }
    const double interval_us = IntervalUs(*d.e);
    Hit h{"lossless_drops", d.e->entity, v1::SEVERITY_CRITICAL, std::min(1.0, d.drops / std::max(1.0, d.packets) * 1e3),
          d.e->ts_us - static_cast<int64_t>(interval_us)};
    h.evidence.push_back(Ev(*d.e, "queue_drops", d.drops, d.drops / (interval_us / 1e6), StrCat("queue ", d.q)));
    h.summary = StrCat(d.e->entity, " dropped ", Num(d.drops), " packets on lossless queue ", d.q,
                       pfc_off != pfc_off_cause.end() ? StrCat(": PFC is off at ", pfc_off->second)
                       : pfc_known_off                ? ": PFC is not enabled on that priority"
                                                      : ": PFC is not protecting it");
    if (pfc_off != pfc_off_cause.end()) h.cause_key = StrCat("pfc_misconfig|", pfc_off->second);
    hits->push_back(std::move(h));
  }
  for (const auto& [device, drops] : threshold_drops) {
    // Several queues of one switch: the switch's setting, not one queue's.
    const std::string entity = drops.size() >= 2 ? device : drops[0]->e->entity;
    const double fill = device_pool_fill.at(device);
    double total = 0, packets = 0;
    Hit h{"buffer_threshold_drops", entity, v1::SEVERITY_CRITICAL, 0, 0};
    for (const Drop* d : drops) {
      const double interval_us = IntervalUs(*d->e);
      const int64_t start = d->e->ts_us - static_cast<int64_t>(interval_us);
      h.start_us = h.start_us == 0 ? start : std::min(h.start_us, start);
      total += d->drops, packets += d->packets;
      h.evidence.push_back(Ev(*d->e, "queue_drops", d->drops, d->drops / (interval_us / 1e6),
                              StrCat("lossless queue ", d->q,
                                     d->depth >= 0 ? StrCat(", ", Num(d->depth), "B queued") : std::string())));
    }
    h.magnitude = std::min(1.0, total / std::max(1.0, packets) * 1e3);
    for (const auto& [key, e] : entities_)
      if (e.scope == v1::SCOPE_QUEUE && Fresh(e, now_us) && EntityDevice(e.entity) == device)
        if (const Reading* used = Find(e, "buffer_used_bytes"))
          h.evidence.push_back(Ev(e, "buffer_used_bytes", 0, used->value, "shared buffer pool"));
    h.summary = StrCat(drops.size(), " lossless queue(s) on ", device, " dropped ", Num(total),
                       " packets while its shared buffer was at most ", Pct(fill),
                       " full and no pause held them: a queue drop threshold below what PFC and ECN need");
    hits->push_back(std::move(h));
  }

  // ECN: a queue far beyond any marking threshold that marks nothing, and is
  // not simply held by pauses from downstream, has ECN off. (Only where the
  // agent reports the queue's mark counter: a missing counter is not zero.)
  std::vector<Hit> origins;
  std::unordered_map<std::string, std::string> congestion_origin;  // device -> origin key
  for (const auto& [device, deeps] : device_deep)
    for (const Deep& d : deeps) deep_seen_us_[device] = std::max(deep_seen_us_[device], d.e->ts_us);
  for (auto& [device, deeps] : device_deep) {
    std::vector<const Deep*> unmarked;
    for (const Deep& d : deeps) {
      const bool paused = port_rx.count(d.e->entity) && port_rx[d.e->entity] >= s_.pause_ratio / 5;
      if (!paused && d.marks_known && d.marks == 0) unmarked.push_back(&d);
    }
    if (unmarked.empty()) continue;
    // Several ports of one switch: the switch's profile, not one port.
    const std::string entity = unmarked.size() >= 2 ? device : unmarked[0]->e->entity;
    Hit h{"ecn_misconfig", entity, v1::SEVERITY_CRITICAL, 1.0, 0};
    for (const Deep* d : unmarked) {
      const int64_t start = d->e->ts_us - static_cast<int64_t>(IntervalUs(*d->e));
      h.start_us = h.start_us == 0 ? start : std::min(h.start_us, start);
      h.evidence.push_back(Ev(*d->e, "queue_depth_bytes", 0, d->depth, "lossless queue"));
      h.evidence.push_back(Ev(*d->e, "queue_ecn_marked_packets", 0, 0,
                              StrCat(Num(d->packets), " packets sent, none marked")));
    }
    h.summary = StrCat(unmarked.size(), " lossless queue(s) on ", device, " hold ",
                       Num(unmarked[0]->depth), "B or more and mark nothing: ECN is not configured, so "
                       "congestion becomes PFC");
    congestion_origin[device] = StrCat(h.kind, "|", h.entity);
    origins.push_back(std::move(h));
  }

  // PFC: who pauses whom, and who started it. A port that pauses its peer is
  // explained when its own device cannot drain: another of its ports is
  // paused from downstream, or one of its egress queues is congested.
  // Switches at either end of a slow link (link_degraded): that egress
  // drains at the link's lower speed, so the switch pauses the senders that
  // feed it. Device -> (the slow port on it, the finding's key).
  std::unordered_map<std::string, std::pair<std::string, std::string>> device_slow_link;
  auto slow_link = [&](const std::string& entity) {
    const std::string key = StrCat("link_degraded|", entity);
    device_slow_link.try_emplace(EntityDevice(entity), entity, key);
    if (const std::string peer = PeerPort(topo, entity); !peer.empty())
      device_slow_link.try_emplace(EntityDevice(peer), peer, key);
  };
  // Switches with an uplink down or flapping: its flows rehash onto the
  // switch's other uplinks, and a queue that fills there is its doing.
  // Device -> the link finding's key.
  std::unordered_map<std::string, std::string> device_lost_uplink;
  // Every lost link between switches: (its ends, the finding's key).
  std::vector<std::array<std::string, 3>> lost_links;
  auto lost_link = [&](const std::string& kind, const std::string& entity) {
    const std::string peer = PeerPort(topo, entity);
    if (peer.empty()) return;
    const std::string device = EntityDevice(entity), peer_device = EntityDevice(peer);
    const std::string key = StrCat(kind, "|", entity);
    if (FacesUp(topo, device, peer_device)) device_lost_uplink.try_emplace(device, key);
    if (FacesUp(topo, peer_device, device)) device_lost_uplink.try_emplace(peer_device, key);
    if (FacesUp(topo, device, peer_device) || FacesUp(topo, peer_device, device))
      lost_links.push_back({entity, peer, key});
  };
  auto link_finding = [&](const std::string& kind, const std::string& entity) {
    if (kind == "link_degraded") slow_link(entity);
    else if (kind == "link_down" || kind == "link_flap") lost_link(kind, entity);
  };
  // The link findings raised now, then those still open: a link back at
  // speed leaves the backlog it held to drain through its switch, and one
  // back up has its flows rehashed back, so while its finding is open
  // (clear_after of quiet) the switch's congestion is still its doing.
  for (const Hit& h : *hits) link_finding(h.kind, h.entity);
  for (const auto& [key, t] : active_) link_finding(t.anomaly.kind(), t.anomaly.entity());
  // The key of a lost link when it and `port` lie on one running job's
  // paths: a link down takes its upper switch off every path toward its
  // lower one, so the job's flows toward it rehash onto the paths left,
  // from other switches too.
  auto lost_on_paths = [&](const std::string& port) -> const std::string* {
    if (lost_links.empty() || topo == nullptr) return nullptr;
    for (const v1::Job& job : context.running_jobs) {
      const Footprint& fp = JobPaths(topo, job);
      if (!fp.ports.count(port)) continue;
      for (const auto& [end, other, key] : lost_links)
        if (fp.ports.count(end) || fp.ports.count(other)) return &key;
    }
    return nullptr;
  };
  // A group full on the paths of a job that lost a link: the lost link's
  // flows, rehashed onto what is left, are what overfills it.
  for (Hit& h : *hits)
    if (h.kind == "oversubscription" && h.cause_key.empty())
      if (const auto ports = oversubscribed_ports.find(h.Key()); ports != oversubscribed_ports.end())
        for (const std::string& port : ports->second)
          if (const std::string* key = lost_on_paths(port)) {
            h.cause_key = *key;
            break;
          }
  // The open collision that `port` of `device` takes part in: one of the
  // switch's uplinks when its own uplinks collided (the finding's evidence
  // names ports of the switch itself), or a link toward the switch it
  // faces when the links toward that one collided (evidence on the tier
  // above's ports), or when the switch's own parallel links toward that
  // one did (the finding is the switch's, its evidence those links).
  auto open_collision = [&](const std::string& device, const std::string& port) -> const std::string* {
    const std::string peer = PeerPort(topo, port);
    if (peer.empty()) return nullptr;
    const std::string peer_device = EntityDevice(peer);
    const bool up = FacesUp(topo, device, peer_device);
    if (!up)
      if (const auto own = active_.find(StrCat("ecmp_imbalance|", device)); own != active_.end())
        for (const v1::Evidence& ev : own->second.anomaly.evidence())
          if (EntityDevice(ev.entity()) == device && EntityDevice(PeerPort(topo, ev.entity())) == peer_device)
            return &own->first;
    const auto it = active_.find(StrCat("ecmp_imbalance|", up ? device : peer_device));
    if (it == active_.end()) return nullptr;
    for (const v1::Evidence& ev : it->second.anomaly.evidence())
      if (up ? EntityDevice(ev.entity()) == device : EntityDevice(ev.entity()) != peer_device) return &it->first;
    return nullptr;
  };
  std::vector<const Pause*> victims;
  for (const Pause& p : pauses) {
    const std::string device = EntityDevice(p.e->entity);
    const bool nic = p.e->scope == v1::SCOPE_NIC;
    // A switch pauses its senders because it cannot drain (a deep queue, a
    // slow link, pauses from downstream), and what says so comes with its
    // full readings. A run the fast path saw begin after the switch's last
    // full reading is judged at its next one, so that a switch is never
    // called a storm's origin before its own state was read. A NIC's own
    // state (how much it is paused) comes with its fast readings.
    // And a switch's full reading whose interval is more than twice the one
    // before it (the first after its agent started, or one after a gap)
    // averages the switch's state over time the run had no part in: the
    // queues it filled and the pauses it received are diluted out of sight
    // (a job starting 0.6 s into a 4.7 s first interval showed an RTSW
    // pausing its NICs for 151 ms with every reason for it averaged below
    // its threshold). The run is judged at the next reading.
    const bool diluted =
        !nic && (p.e->before_prev_ts_us == 0 ||
                 p.e->ts_us - p.e->prev_ts_us > 2 * (p.e->prev_ts_us - p.e->before_prev_ts_us));
    const bool unbroken =
        p.unbroken && !diluted &&
        (nic || static_cast<double>(p.e->ts_us) >
                    static_cast<double>(std::max(p.e->ts_us, p.e->fast_ts_us)) - p.unbroken_us);
    if (p.tx < s_.pause_ratio && p.storm_events == 0 && !unbroken && !p.stall_dropping) {
      victims.push_back(&p);
      continue;
    }
    bool explained = false;
    if (!nic) {
      if (auto it = device_paused.find(device); it != device_paused.end())
        for (const std::string& other : it->second)
          if (other != p.e->entity) explained = true;
      const Deep* worst = nullptr;
      if (!explained && device_deep.count(device)) {
        for (const Deep& d : device_deep[device])
          if (port_rx[d.e->entity] < s_.pause_ratio / 5 && (worst == nullptr || d.depth > worst->depth))
            worst = &d;
        // A switch with a deep egress queue pauses because that queue cannot
        // drain, whatever holds it: it is never a storm's origin.
        if (worst == nullptr && !device_deep[device].empty()) explained = true;
      }
      // A pause share is averaged over the interval; a queue depth is read
      // at its end. A queue that drained by the end of this interval was
      // deep when the last one ended, and still explains the pauses it
      // caused in between.
      // A queue that was deep and has not drained below a quarter of that
      // is still congested: a queue hovering around deep_queue_bytes does
      // not turn its switch into a storm origin at each dip below it.
      if (!explained && device_congested.count(device)) explained = true;
      if (!explained) {
        const auto seen = deep_seen_us_.find(device);
        const int64_t interval = static_cast<int64_t>(IntervalUs(*p.e));
        if (seen != deep_seen_us_.end() && seen->second >= p.e->ts_us - interval - interval / 2)
          explained = true;
      }
      // A slow link of the switch is why it cannot drain, whichever of its
      // egress queues is the deepest: the slow port's own, or a sibling that
      // fills behind the pauses and the shared buffer the slow one holds.
      if (auto slow = device_slow_link.find(device); slow != device_slow_link.end()) {
        explained = true;
        worst = nullptr;
        congestion_origin.try_emplace(device, slow->second.second);
      }
      if (worst != nullptr) {
        explained = true;
        auto is_uplink = [&](const std::string& entity) {
          const auto ups = device_uplinks.find(device);
          if (ups == device_uplinks.end()) return false;
          for (const Uplink& u : ups->second)
            if (u.e->entity == entity) return true;
          return false;
        };
        if (auto im = device_imbalance.find(device);
            im != device_imbalance.end() && im->second.uplinks && is_uplink(worst->e->entity) &&
            !congestion_origin.count(device)) {
          // The deep queue is an uplink of a switch whose uplinks collide:
          // the collision is the origin of its pauses, whether this uplink
          // is among the busiest it names or fills behind pauses from above.
          congestion_origin[device] = im->second.key;
        } else if (auto toward = toward_imbalance.find(worst->e->entity);
                   toward != toward_imbalance.end() && !congestion_origin.count(device)) {
          // The deep queue is a link toward a switch whose links from this
          // tier collide: the same.
          congestion_origin[device] = toward->second;
        } else if (const std::string* key = open_collision(device, worst->e->entity);
                   key != nullptr && !congestion_origin.count(device)) {
          // A collision still open that this round's readings did not show
          // (its links read at moments its load was momentarily even): the
          // flows hashed onto the link stay there until routes change, so
          // its queue is still the collision's, as a link finding still open
          // explains the congestion it left.
          congestion_origin[device] = *key;
        } else if (collision_pending.count(worst->e->entity)) {
          // A link toward a switch that may be a collision, judged at the
          // next readings: neither a hot spot nor an origin yet.
        } else if (auto lost = device_lost_uplink.find(device);
                   lost != device_lost_uplink.end() && is_uplink(worst->e->entity) &&
                   !congestion_origin.count(device)) {
          // The deep queue is an uplink of a switch that lost another: the
          // lost link's flows fill it.
          congestion_origin[device] = lost->second;
        } else if (const std::string* key = lost_on_paths(worst->e->entity);
                   key != nullptr && is_uplink(worst->e->entity) && !congestion_origin.count(device)) {
          // The deep queue is an uplink on the paths of a job that lost
          // another link: the same, from a switch the lost link's flows
          // reached it through.
          congestion_origin[device] = *key;
        } else if (auto full = device_oversubscribed.find(device);
                   full != device_oversubscribed.end() && is_uplink(worst->e->entity) &&
                   !congestion_origin.count(device)) {
          // The deep queue is an uplink of a switch whose uplinks are all
          // full: the group's shortfall is the origin of its pauses.
          congestion_origin[device] = full->second;
        } else if (auto toward = toward_oversubscribed.find(worst->e->entity);
                   toward != toward_oversubscribed.end() && !congestion_origin.count(device)) {
          // The deep queue is a link toward a switch whose links from this
          // tier are all full: the same.
          congestion_origin[device] = toward->second;
        } else if (!congestion_origin.count(device)) {
          // Marking, but DCQCN cannot hold it: congestion beyond ECN's reach.
          Hit h{"ecn_hotspot", worst->e->entity, v1::SEVERITY_WARNING,
                std::min(1.0, worst->depth / (4.0 * static_cast<double>(s_.deep_queue_bytes))),
                worst->e->ts_us - static_cast<int64_t>(IntervalUs(*worst->e))};
          h.evidence.push_back(Ev(*worst->e, "queue_depth_bytes", 0, worst->depth, "lossless queue"));
          h.evidence.push_back(Ev(*worst->e, "queue_ecn_marked_packets", worst->marks,
                                  worst->marks / (IntervalUs(*worst->e) / 1e6),
                                  StrCat(Pct(worst->marks / worst->packets), " of packets marked")));
          h.summary = StrCat("egress ", worst->e->entity, " is congested beyond what ECN can hold (",
                             Num(worst->depth), "B queued, ", Pct(worst->marks / worst->packets),
                             " marked); its switch pauses the senders");
          congestion_origin[device] = StrCat(h.kind, "|", h.entity);
          origins.push_back(std::move(h));
        }
      }
    }
    if (explained) {
      victims.push_back(&p);
      continue;
    }
    const bool storm = p.tx >= s_.storm_ratio || p.storm_events > 0 || unbroken || p.stall_dropping;
    // A NIC that says it stalled until its stall prevention gave up is as
    // sure as a storm gets, whatever it pauses now.
    const double sure = p.stall_errors > 0 || p.stall_dropping ? 1.0 : 0.0;
    Hit h{storm ? "pfc_storm" : "pfc_pause", p.e->entity,
          storm ? v1::SEVERITY_CRITICAL : v1::SEVERITY_WARNING, std::max({p.tx, p.fast_tx, sure}),
          p.e->ts_us - static_cast<int64_t>(IntervalUs(*p.e))};
    const double interval_s = IntervalUs(*p.e) / 1e6;
    h.evidence.push_back(Ev(*p.e, "pfc_tx_pause_us", LosslessDelta(*p.e, "pfc_tx_pause_us"),
                            LosslessDelta(*p.e, "pfc_tx_pause_us") / interval_s,
                            StrCat("pausing its peer ", Pct(p.tx), " of the time")));
    if (unbroken) {
      h.start_us = std::min(h.start_us, std::max(p.e->ts_us, p.e->fast_ts_us) - static_cast<int64_t>(p.unbroken_us));
      // The run's length goes in the note: the same pause is already in
      // the counter's total above, and a total counts each pause once.
      h.evidence.push_back(Ev(*p.e, "pfc_tx_pause_us", 0, std::max(p.tx, p.fast_tx) * 1e6,
                              StrCat("pausing its peer without a break for ", Num(p.unbroken_us / 1000), " ms")));
    }
    const double frames = LosslessDelta(*p.e, "pfc_tx_pause_frames");
    if (frames > 0) h.evidence.push_back(Ev(*p.e, "pfc_tx_pause_frames", frames, frames / interval_s));
    if (const double warnings = p.storm_events - p.stall_errors; warnings > 0)
      h.evidence.push_back(Ev(*p.e, "pause_storm_warnings", warnings, warnings / interval_s,
                              "the NIC's stall prevention: pausing past its warning watermark"));
    if (p.stall_errors > 0)
      h.evidence.push_back(Ev(*p.e, "pause_storm_errors", p.stall_errors, p.stall_errors / interval_s,
                              "the NIC's stall prevention timed out: it stopped sending pauses"));
    if (p.stall_dropping)
      h.evidence.push_back(Ev(*p.e, "rx_discards_phy", p.rx_discards, p.rx_discards / interval_s,
                              "dropped on receive since its stall prevention stopped its pauses"));
    h.summary = p.stall_dropping && p.tx < s_.pause_ratio
                    ? StrCat(p.e->entity, " stalled on the lossless class until its PFC stall prevention timed out; "
                                          "it no longer pauses its link partner and drops what it cannot receive: "
                                          "it is the origin of a PFC storm its NIC cut short")
                : unbroken && p.tx < s_.storm_ratio
                    ? StrCat(p.e->entity, " has paused its link partner without a break for ",
                             Num(p.unbroken_us / 1000), " ms on the lossless class and nothing downstream explains "
                             "it: it is the origin of a PFC storm")
                : storm ? StrCat(p.e->entity, " keeps its link partner paused ", Pct(p.tx),
                               " of the time on the lossless class and nothing downstream explains it: "
                               "it is the origin of a PFC storm")
                      : StrCat(p.e->entity, " pauses its link partner ", Pct(p.tx),
                               " of the time with no congestion or pause downstream to explain it");
    origins.push_back(std::move(h));
  }
  // The pfcwd on the switch side names the storming peer too.
  if (topo != nullptr) {
    for (Hit& o : origins) {
      if (o.kind != "pfc_storm") continue;
      const std::string peer = PeerPort(topo, o.entity);
      if (peer.empty()) continue;
      auto it = entities_.find(Key(v1::SCOPE_PORT, peer));
      if (it == entities_.end() || !Fresh(it->second, now_us)) continue;
      const double wd = SumSeries(it->second, "pfcwd_storms_detected").delta;
      if (wd > 0) o.evidence.push_back(Ev(it->second, "pfcwd_storms_detected", wd, 0, "PFC watchdog on the peer"));
    }
  }

  // Up the pause tree from `devices`, breadth first: a switch paused from
  // further on relays what holds the switch that pauses it; the first switch
  // on the way that is congested on its own account, or whose egress
  // collides, is where the tree starts. "" when none is.
  auto origin_upstream = [&](std::vector<std::string> devices) -> std::string {
    std::deque<std::string> todo;
    std::unordered_set<std::string> visited;
    for (std::string& device : devices)
      if (!device.empty() && visited.insert(device).second) todo.push_back(std::move(device));
    while (!todo.empty()) {
      const std::string device = std::move(todo.front());
      todo.pop_front();
      if (auto it = congestion_origin.find(device); it != congestion_origin.end()) return it->second;
      if (auto it = device_collision.find(device); it != device_collision.end()) return it->second;
      if (auto it = device_paused.find(device); it != device_paused.end())
        for (const std::string& port : it->second)
          if (const std::string pauser = PeerPort(topo, port); !pauser.empty())
            if (visited.insert(EntityDevice(pauser)).second) todo.push_back(EntityDevice(pauser));
    }
    return "";
  };
  auto pick_origin = [&](const std::string& entity) -> std::string {
    const std::string device = EntityDevice(entity);
    if (auto it = congestion_origin.find(device); it != congestion_origin.end()) return it->second;
    const Hit* best = nullptr;
    for (const Hit& o : origins) {
      if (o.kind == "pfc_pause") continue;
      const bool here = EntityDevice(o.entity) == device || o.entity == device;
      if (here) return StrCat(o.kind, "|", o.entity);
      if (best == nullptr || o.magnitude > best->magnitude) best = &o;
    }
    if (best != nullptr) return StrCat(best->kind, "|", best->entity);
    // No origin among the pausers: the congestion of the switch at the
    // other end of the port's link (an ECMP collision there).
    const std::string peer = PeerPort(topo, entity);
    if (!peer.empty())
      if (auto it = congestion_origin.find(EntityDevice(peer)); it != congestion_origin.end()) return it->second;
    // Nor there: a switch whose uplinks collide, at either end of the link,
    // pauses what feeds the collided uplinks even while no queue of it is
    // deep enough to name (the pausing port itself is a victim then).
    for (const std::string& device : {EntityDevice(entity), peer.empty() ? std::string() : EntityDevice(peer)})
      if (auto it = device_imbalance.find(device); it != device_imbalance.end() && it->second.uplinks)
        return it->second.key;
    // Nor there: up the pause tree, from the other end of the link.
    return origin_upstream({peer.empty() ? std::string() : EntityDevice(peer), EntityDevice(entity)});
  };
  for (const Pause* p : victims) {
    const double ratio = std::max(p->tx, p->rx);
    if (ratio < s_.pause_ratio) continue;
    Hit h{"pfc_pause", p->e->entity, v1::SEVERITY_INFO, ratio,
          p->e->ts_us - static_cast<int64_t>(IntervalUs(*p->e))};
    const double interval_s = IntervalUs(*p->e) / 1e6;
    if (p->rx > 0)
      h.evidence.push_back(Ev(*p->e, "pfc_rx_pause_us", LosslessDelta(*p->e, "pfc_rx_pause_us"),
                              LosslessDelta(*p->e, "pfc_rx_pause_us") / interval_s,
                              StrCat("paused ", Pct(p->rx), " of the time")));
    if (p->tx > 0)
      h.evidence.push_back(Ev(*p->e, "pfc_tx_pause_us", LosslessDelta(*p->e, "pfc_tx_pause_us"),
                              LosslessDelta(*p->e, "pfc_tx_pause_us") / interval_s,
                              StrCat("pausing its peer ", Pct(p->tx), " of the time")));
    h.cause_key = pick_origin(p->e->entity);
    h.summary = StrCat(p->e->entity, " is in a pause tree (", Pct(ratio), " of the time paused or pausing)",
                       h.cause_key.empty() ? "" : StrCat(", spread from ", h.cause_key.substr(h.cause_key.find('|') + 1)));
    hits->push_back(std::move(h));
  }
  for (Hit& o : origins) hits->push_back(std::move(o));
  // A buffer pool that filled on a switch whose queues are congested, that
  // a slow link holds, or that pauses from further on hold, is that
  // congestion's consequence (a healthy fabric's ECMP collisions filled two
  // CTSWs' lossless pools to 90% in a generated run). Alone, it stands.
  for (Hit& h : *hits)
    if (h.kind == "buffer_high" && h.cause_key.empty()) {
      const std::string device = EntityDevice(h.entity);
      if (auto slow = device_slow_link.find(device); slow != device_slow_link.end())
        h.cause_key = slow->second.second;
      else
        h.cause_key = origin_upstream({device});
    }

  // Loss on NICs behind a bad link is that link's doing; with no bad link,
  // a switch queue that drops.
  std::string link_cause;
  for (const Hit& h : *hits)
    if (h.kind == "link_errors" || h.kind == "link_flap" || h.kind == "link_down") {
      link_cause = StrCat(h.kind, "|", h.entity);
      break;
    }
  for (const Hit& h : *hits)
    if (link_cause.empty() && (h.kind == "buffer_threshold_drops" || h.kind == "lossless_drops"))
      link_cause = StrCat(h.kind, "|", h.entity);
  if (!link_cause.empty())
    for (Hit& h : *hits)
      if (h.kind == "silent_loss") {
        // Prefer the NIC's own link when that is the bad one.
        const std::string own = CanonicalLinkEnd(topo, h.entity);
        bool own_bad = false;
        for (const Hit& l : *hits)
          if ((l.kind == "link_errors" || l.kind == "link_flap" || l.kind == "link_down") && l.entity == own)
            own_bad = true, h.cause_key = StrCat(l.kind, "|", l.entity);
        if (!own_bad) h.cause_key = link_cause;
      }
}

void Detectors::DetectJobs(int64_t now_us, const FabricContext& context, std::vector<Hit>* hits) {
  std::unordered_map<std::string, const v1::Job*> registry;
  for (const v1::Job& job : context.running_jobs) registry[job.id()] = &job;
  for (auto& [id, job] : jobs_) {
    // A record leaves the window once its collective was judged, or after
    // kRecordKeepUs if it never is: the hosts deliver one collective's
    // records a poll interval apart, and a record dropped before the last
    // host's arrived left its collective one rank short for good (a
    // straggler apart in 39 collectives in a row was never judged, on a
    // fabric polled every 2 s).
    constexpr int64_t kRecordKeepUs = 30'000'000;
    auto judged = [&](const CollRecord& r) {
      const auto it = job.buckets.find(StrCat(SizeBucket(r.op, r.bytes), " ", r.comm));
      return it != job.buckets.end() && r.seq <= it->second.last_seq;
    };
    while (!job.records.empty() && job.records.front().ts_us < job.newest_us - s_.collective_window_us &&
           (judged(job.records.front()) || job.records.front().ts_us < job.newest_us - kRecordKeepUs))
      job.records.pop_front();
    const v1::Job* reg = registry.count(id) ? registry[id] : nullptr;
    // A registered, running job that completes nothing: hung on a dead
    // ring. (Without the registry a job that finished looks the same.)
    job.stalled = reg != nullptr && job.newest_us > 0 && now_us - job.newest_us >= s_.stall_after_us;
    if (job.stalled) {
      Hit h{"job_stalled", id, v1::SEVERITY_CRITICAL, 1.0, job.newest_us};
      h.job = id;
      v1::Evidence ev;
      ev.set_entity(id);
      ev.set_counter("seconds_since_last_collective");
      ev.set_peak_rate(static_cast<double>(now_us - job.newest_us) / 1e6);
      h.evidence.push_back(ev);
      h.summary = StrCat("job ", id, " has completed no collective for ",
                         (now_us - job.newest_us) / 1'000'000, " s");
      hits->push_back(std::move(h));
      continue;
    }
    if (job.records.empty() || job.newest_us <= job.judged_until_us) continue;
    job.judged_until_us = job.newest_us;

    // One collective as its ranks saw it. Only collectives at least half
    // the ranks have reported are judged (hosts deliver at different
    // moments; half is enough for a median), and only the latest few, so a
    // window never mixes two regimes for long.
    struct Seq {
      int64_t ts_us = 0;
      std::vector<const CollRecord*> ranks;
    };
    // Keyed by communicator, then op and size: sequence numbers count per
    // communicator, and a job may have several.
    std::map<std::string, std::map<uint64_t, Seq>> by_bucket;
    for (const CollRecord& r : job.records) {
      Seq& seq = by_bucket[StrCat(SizeBucket(r.op, r.bytes), " ", r.comm)][r.seq];
      seq.ts_us = std::max(seq.ts_us, r.ts_us);
      seq.ranks.push_back(&r);
    }
    for (const auto& [bucket, seqs] : by_bucket) {
      BucketState& st = job.buckets[bucket];
      for (const auto& [n, seq] : seqs) {
        st.ranks = std::max(st.ranks, static_cast<uint32_t>(seq.ranks.size()));
        for (const CollRecord* r : seq.ranks) st.ranks = std::max(st.ranks, r->n_ranks);
      }
      // Collectives are judged once, in order: each as soon as every rank
      // has reported it, or once a newer one is complete (what is missing
      // will not come).
      uint64_t newest_complete = 0;
      for (const auto& [n, seq] : seqs)
        if (seq.ranks.size() >= st.ranks) newest_complete = n;
      std::vector<std::pair<uint64_t, const Seq*>> fresh;
      for (auto it = seqs.upper_bound(st.last_seq); it != seqs.end() && it->first <= newest_complete; ++it)
        fresh.push_back({it->first, &it->second});
      if (newest_complete > st.last_seq) st.last_seq = newest_complete;

      const std::string op_size = bucket.substr(0, bucket.find(' '));
      JobSummary& summary = job.summary[bucket];
      summary.job = id;
      summary.op = op_size.substr(0, op_size.find('/'));
      summary.size = op_size.substr(op_size.find('/') + 1);
      for (const auto& [n, seq] : fresh) {
        if (seq->ranks.size() * 2 < st.ranks) continue;
        double sum = 0;
        for (const CollRecord* r : seq->ranks) sum += r->busbw;
        JudgeBusbw(st, sum / static_cast<double>(seq->ranks.size()), seq->ts_us);
        if (seq->ranks.size() >= st.ranks) JudgeFastest(st, seq->ranks);
      }
      // The newest few collectives' busbw, every rank's view, for the summary.
      {
        constexpr size_t kBusbwSeqs = 4;
        double sum = 0;
        size_t n = 0, used = 0;
        for (auto it = seqs.rbegin(); it != seqs.rend() && used < kBusbwSeqs; ++it) {
          if (it->second.ranks.size() * 2 < st.ranks) continue;
          ++used;
          for (const CollRecord* r : it->second.ranks) sum += r->busbw, ++n;
        }
        if (n > 0) summary.recent_busbw_gbs = sum / static_cast<double>(n);
      }
      summary.baseline_busbw_gbs = st.busbw.level;
      summary.regressed = st.busbw.llr >= s_.regression_llr;
      if (summary.regressed) {
        const double mean = st.since_n > 0 ? st.since_sum / st.since_n : summary.recent_busbw_gbs;
        const double baseline = st.busbw.level;
        Hit h{"busbw_regression", id, v1::SEVERITY_WARNING, std::max(0.0, 1 - mean / baseline), st.onset_us};
        h.job = id;
        v1::Evidence ev;
        ev.set_entity(id);
        ev.set_counter("busbw_gbs");
        ev.set_total(baseline);
        ev.set_peak_rate(mean);
        char note[320];
        std::snprintf(note, sizeof note,
                      "%s (communicator %s): baseline %s GB/s (median of %zu healthy collectives, spread %.1f%%); CUSUM "
                      "log-likelihood ratio %.0f over %.0f collectives since the change (finding at %.0f)",
                      op_size.c_str(), bucket.substr(op_size.size() + 1).c_str(), Num(baseline).c_str(), st.busbw.calm.size(),
                      100 * st.busbw.sigma / baseline, st.busbw.llr, st.since_n, s_.regression_llr);
        ev.set_note(note);
        h.evidence.push_back(ev);
        if (st.step_us != 0 && st.step_n > 0) {
          v1::Evidence step;
          step.set_entity(id);
          step.set_counter("busbw_step");
          step.set_total(st.step_from);
          step.set_peak_rate(st.step_sum / st.step_n);
          step.set_at_us(st.step_us);
          step.set_note(StrCat(op_size, " (communicator ", bucket.substr(op_size.size() + 1),
                               "): fell again while regressed, a further change"));
          h.evidence.push_back(std::move(step));
        }
        char buf[200];
        std::snprintf(buf, sizeof buf, "job %s %s busbw %.1f GB/s, %.0f%% below its baseline %.1f GB/s",
                      id.c_str(), op_size.c_str(), mean, 100 * (1 - mean / baseline), baseline);
        h.summary = buf;
        hits->push_back(std::move(h));
      }

      // Stragglers: the same ranks have had the shortest kernels, clearly
      // apart from the rest, in more consecutive collectives than chance
      // allows. One late rank leads the set of one; two about as late trade
      // that place by noise, and hold the set of two.
      if (st.ranks < 3) continue;
      std::set<uint32_t> named;
      auto entity_of = [&](uint32_t rank, const std::string& host) {
        if (reg != nullptr)
          for (const auto& placement : reg->ranks())
            if (placement.rank() == rank) return StrCat(placement.host(), "/gpu", placement.gpu());
        return StrCat(host, "/rank", rank);
      };
      for (size_t m = 1; m <= kStragglerSets; ++m) {
        const FastSet& fs = st.fast_sets[m - 1];
        if (fs.ranks.size() != m || fs.streak_ranks != st.ranks || fs.streak < StreakNeeded(st.ranks, m)) continue;
        // Ranks already found late (by a smaller set this round, or by a
        // finding still open) are given: the set is evidence for its other
        // members only as far as their places among the remaining ranks
        // beat chance on their own. (A generated run, seed 63 run 54: two
        // stragglers held the two shortest kernels, and the rank with the
        // third shortest, any of the other 62 by chance, kept its place 3
        // times in a row: 5.8e-10 over every set of three, 1 in 3,844 given
        // the two.)
        std::vector<bool> given(m, false);
        size_t known = 0;
        for (size_t i = 0; i < m; ++i) {
          given[i] = named.count(fs.ranks[i]) > 0 ||
                     active_.count(StrCat("straggler|", entity_of(fs.ranks[i], fs.hosts[i]), "|", id)) > 0;
          known += given[i];
        }
        const uint32_t others = st.ranks - static_cast<uint32_t>(known);
        const bool news_hold = known == m || fs.streak >= StreakNeeded(others, m - known);
        const double chance = std::pow(Choose(st.ranks, m), 1.0 - fs.streak);
        const double news_chance = known == m ? chance : std::pow(Choose(others, m - known), 1.0 - fs.streak);
        for (size_t i = 0; i < m; ++i) {
          const uint32_t rank = fs.ranks[i];
          if (!given[i] && !news_hold) continue;
          if (!named.insert(rank).second) continue;
          const std::string entity = entity_of(rank, fs.hosts[i]);
          Hit h{"straggler", entity, v1::SEVERITY_WARNING, std::max(0.0, 1 - fs.exec[i] / fs.median), fs.since_us};
          h.job = id;
          v1::Evidence ev;
          ev.set_entity(entity);
          ev.set_counter("coll_exec_time_us");
          ev.set_peak_rate(fs.exec[i]);
          ev.set_total(fs.median);
          char note[300];
          if (m == 1)
            std::snprintf(note, sizeof note,
                          "rank %u; shortest kernel, apart from the other %u, in the last %d collectives in a row "
                          "(chance on a healthy job %.1e); median kernel time %s us",
                          rank, st.ranks - 1, fs.streak, chance, Num(fs.median).c_str());
          else if (given[i] || known == 0)
            std::snprintf(note, sizeof note,
                          "rank %u; the %zu shortest kernels were ranks %s, apart from the other %zu, in the last %d "
                          "collectives in a row (chance on a healthy job %.1e); median kernel time %s us",
                          rank, m, absl::StrJoin(fs.ranks, " and ").c_str(), st.ranks - m, fs.streak, chance,
                          Num(fs.median).c_str());
          else
            std::snprintf(note, sizeof note,
                          "rank %u; the %zu shortest kernels were ranks %s, apart from the other %zu, in the last %d "
                          "collectives in a row (chance, given the %zu of them already late, %.1e); median kernel "
                          "time %s us",
                          rank, m, absl::StrJoin(fs.ranks, " and ").c_str(), st.ranks - m, fs.streak, known,
                          news_chance, Num(fs.median).c_str());
          ev.set_note(note);
          h.evidence.push_back(ev);
          char buf[220];
          std::snprintf(buf, sizeof buf,
                        "rank %u (%s) of job %s is late: the other ranks wait for it inside their kernels "
                        "(its kernel time %.0f us vs median %.0f us)",
                        rank, entity.c_str(), id.c_str(), fs.exec[i], fs.median);
          h.summary = buf;
          hits->push_back(std::move(h));
        }
      }
    }
  }
}

// Noisy neighbours. A job whose busbw fell (a busbw_regression this round)
// while lossless queues on its paths are congested, on ports no fault
// explains, and whose congested ports another job's paths share, where
// that other job arrived (its first collective, else its registration)
// from kContentionLeadUs before the slowdown's onset to kContentionLagUs
// after it: the newcomer's traffic took the capacity. Counters say how
// busy a queue is, not whose packets fill it, so the arrival time is what
// ties the congestion to the newcomer; a job that ran beside the victim
// for long before it slowed is not blamed.
void Detectors::DetectContention(const FabricContext& context, std::vector<Hit>* hits) {
  constexpr int64_t kContentionLeadUs = 10'000'000, kContentionLagUs = 10'000'000;
  const Topology* topo = context.topology.get();
  if (topo == nullptr || own_congested_.empty()) return;
  const std::map<std::string, Slowdown> slowed = SlowedJobs(*hits);
  if (slowed.empty()) return;
  // What a fabric fault explains: both ends of a faulty link, or the whole
  // switch of a switch-wide finding (its ECN or buffer profile).
  std::unordered_set<std::string> faulted_ports, faulted_devices;
  for (const Hit& h : *hits) {
    if (h.job.empty() && !IsConsequenceKind(h.kind) && h.kind != "ecn_hotspot" && h.kind != "ecmp_imbalance" &&
        h.kind != "oversubscription") {
      if (h.entity.find('/') == std::string::npos) {
        faulted_devices.insert(h.entity);
        continue;
      }
      faulted_ports.insert(h.entity);
      if (const std::string peer = PeerPort(topo, h.entity); !peer.empty()) faulted_ports.insert(peer);
    }
  }
  auto arrival_us = [&](const v1::Job& job) {
    const auto seen = jobs_.find(job.id());
    return seen != jobs_.end() && seen->second.first_us > 0 ? seen->second.first_us : job.start_us();
  };
  // Hits on a shared congested port are the contention's doing.
  std::vector<Hit> found;
  std::map<std::string, std::string> port_cause;  // port -> contention key
  for (const auto& [victim_id, slowdown] : slowed) {
    const int64_t onset_us = slowdown.onset_us;
    const v1::Job* victim = RunningJob(context, victim_id);
    if (victim == nullptr) continue;
    const Footprint& mine = JobPaths(topo, *victim);
    std::vector<std::string> congested;  // on the victim's paths, switch ports, no fault there
    for (const auto& [port, c] : own_congested_)
      if (mine.ports.count(port) && topo->FindSwitch(EntityDevice(port)) != nullptr && !faulted_ports.count(port) &&
          !faulted_devices.count(EntityDevice(port)))
        congested.push_back(port);
    if (congested.empty()) continue;
    const v1::Job* best = nullptr;
    std::vector<std::string> best_shared;
    int64_t best_arrival = 0;
    for (const v1::Job& other : context.running_jobs) {
      if (other.id() == victim_id) continue;
      const int64_t arrived = arrival_us(other);
      if (arrived < onset_us - kContentionLeadUs || arrived > onset_us + kContentionLagUs) continue;
      const Footprint& theirs = JobPaths(topo, other);
      std::vector<std::string> shared;
      for (const std::string& port : congested)
        if (theirs.ports.count(port)) shared.push_back(port);
      if (shared.empty()) continue;
      if (best == nullptr || shared.size() > best_shared.size() ||
          (shared.size() == best_shared.size() && arrived > best_arrival))
        best = &other, best_shared = std::move(shared), best_arrival = arrived;
    }
    if (best == nullptr) continue;
    std::sort(best_shared.begin(), best_shared.end(), [&](const std::string& a, const std::string& b) {
      return own_congested_.at(a).marks > own_congested_.at(b).marks;
    });
    Hit h{"job_contention", best->id(), v1::SEVERITY_WARNING, std::clamp(slowdown.drop, 0.0, 1.0), onset_us};
    h.job = victim_id;
    v1::Evidence arrival;
    arrival.set_entity(best->id());
    arrival.set_counter("job_arrival_s");
    arrival.set_peak_rate(static_cast<double>(onset_us - best_arrival) / 1e6);
    arrival.set_note(StrCat("its first collective at ", FormatUtcTimeOfDay(best_arrival), "; job ", victim_id,
                            "'s busbw fell from ", FormatUtcTimeOfDay(onset_us)));
    h.evidence.push_back(arrival);
    constexpr size_t kShownPorts = 8;
    std::vector<std::string> shown;
    for (const std::string& port : best_shared) {
      const Congested& c = own_congested_.at(port);
      if (shown.size() < kShownPorts) {
        shown.push_back(port);
        const double interval_s = IntervalUs(*c.e) / 1e6;
        h.evidence.push_back(Ev(*c.e, "queue_ecn_marked_packets", c.marks, c.marks / interval_s,
                                StrCat("on the paths of jobs ", victim_id, " and ", best->id(), "; ",
                                       c.packets > 0 ? Pct(c.marks / c.packets) : "0%", " of packets marked")));
      }
      port_cause.try_emplace(port, h.Key());
    }
    h.summary = StrCat("job ", victim_id, " is slowed by job ", best->id(), "'s traffic: they share ", best_shared.size(),
                       " congested link(s) (", absl::StrJoin(shown, ", "), best_shared.size() > shown.size() ? ", ..." : "",
                       "), and job ", best->id(), " arrived as job ", victim_id, "'s busbw fell ",
                       Pct(slowdown.drop), "; no fault is on those links");
    found.push_back(std::move(h));
  }
  for (Hit& h : *hits) {
    if (h.cause_key.empty() && (h.kind == "ecn_hotspot" || h.kind == "pfc_pause"))
      if (auto it = port_cause.find(h.entity); it != port_cause.end()) h.cause_key = it->second;
    // A group the newcomer's traffic filled: its links are the evidence.
    if (h.cause_key.empty() && h.kind == "oversubscription")
      for (const v1::Evidence& ev : h.evidence)
        if (auto it = port_cause.find(ev.entity()); it != port_cause.end()) {
          h.cause_key = it->second;
          break;
        }
  }
  for (Hit& h : found) hits->push_back(std::move(h));
}

const Footprint& Detectors::JobPaths(const Topology* topo, const v1::Job& job) {
  auto& [ranks, fp] = footprints_[job.id()];
  if (ranks != static_cast<size_t>(job.ranks_size()) || (fp.hosts.empty() && job.ranks_size() > 0)) {
    ranks = static_cast<size_t>(job.ranks_size());
    fp = JobFootprint(topo, job, {});
  }
  return fp;
}

// Latency regressions, as the paper's CTSW image whose new packet scheduling
// raised port-to-port latency: a job's collectives slower while nothing on
// its paths shows congestion, loss or errors. Counters cannot see latency,
// so what names the culprit is a change: a host or switch on the job's
// paths that reported a new version (an image, a firmware, the agent
// itself; TelemetryBatch.components) from kChangeLeadUs before the
// slowdown's onset to kChangeLagUs after. Judged once the slowdown has
// lasted kLatencySettleUs (20 s), so that the faults that explain a
// slowdown (found within a few polls, a straggler within about ten seconds
// of collectives) have had their chance first. Without such a change there is no finding:
// clean counters and nothing changed is not a diagnosis.
void Detectors::DetectLatency(int64_t now_us, const FabricContext& context, std::vector<Hit>* hits) {
  constexpr int64_t kLatencySettleUs = 20'000'000, kPreexistingUs = 60'000'000;
  constexpr int64_t kCongestionKeepUs = 180'000'000, kLaterFindingUs = 5'000'000;
  const Topology* topo = context.topology.get();
  if (topo == nullptr) return;
  // Congestion on every registered job's paths this round, for later
  // comparison.
  for (const v1::Job& job : context.running_jobs) {
    const auto state = jobs_.find(job.id());
    if (state == jobs_.end()) continue;
    const Footprint& fp = JobPaths(topo, job);
    double marks = 0, packets = 0;
    auto add = [&](const Congested& c) {
      const double interval_s = IntervalUs(*c.e) / 1e6;
      marks += c.marks / interval_s, packets += c.packets / interval_s;
    };
    // Whichever of the two sets is smaller is walked.
    if (own_congested_.size() <= fp.ports.size()) {
      for (const auto& [port, c] : own_congested_)
        if (fp.ports.count(port)) add(c);
    } else {
      for (const std::string& port : fp.ports)
        if (auto it = own_congested_.find(port); it != own_congested_.end()) add(it->second);
    }
    auto& history = state->second.congestion;
    history.push_back({now_us, marks, packets});
    while (!history.empty() && history.front().ts_us < now_us - kCongestionKeepUs) history.pop_front();
  }
  for (const auto& [id, slowdown] : SlowedJobs(*hits)) {
    const int64_t onset_us = slowdown.onset_us;
    if (now_us - onset_us < kLatencySettleUs) continue;
    const v1::Job* job = RunningJob(context, id);
    if (job == nullptr) continue;
    const Footprint& fp = JobPaths(topo, *job);
    // Anything found on its paths since shortly before the onset explains
    // it; what began well after the onset (more than a few readings: a
    // finding's start is its first reading's interval) came too late to.
    // Nor does what was there for the first half of the job's life before
    // the onset, or before its first collective: the job's baseline, the
    // median busbw from which it fell, was measured with it. (The median
    // is over its last 600 calm collectives, which may be fewer than its
    // whole life: a finding there for most of them but not for half the
    // life still counts as explaining, which only keeps this detector
    // quieter.)
    const int64_t first_us = jobs_[id].first_us;
    const int64_t baseline_half_us = first_us > 0 ? first_us + std::max<int64_t>(0, onset_us - first_us) / 2 : 0;
    bool explained = false;
    for (const Hit& h : *hits) {
      if (h.kind == "busbw_regression" || h.kind == "latency_regression" || h.kind == "ecmp_imbalance") continue;
      const bool on_paths = !h.job.empty() ? h.job == id : fp.ports.count(h.entity) || fp.devices.count(h.entity);
      if (!on_paths) continue;
      const auto tracked = active_.find(h.Key());
      const int64_t began = tracked != active_.end() ? tracked->second.anomaly.start_us() : h.start_us;
      if (began < baseline_half_us) continue;
      if (began >= onset_us - kPreexistingUs && began <= onset_us + kLaterFindingUs) explained = true;
    }
    if (explained) continue;
    // Congestion moved: ECN marks per second on its paths' congested queues
    // (the mean over the 10 s after the onset against the minute before it)
    // rose by half again, plus a tenth of a percent of those queues'
    // packets. A slower job sends less: with latency alone they fall. What
    // came later (a fault that began after the onset) is not what slowed it.
    const auto& history = jobs_[id].congestion;
    double before_marks = 0, after_marks = 0, after_packets = 0;
    int before_n = 0, after_n = 0;
    for (const auto& c : history) {
      if (c.ts_us >= onset_us - kPreexistingUs && c.ts_us <= onset_us) before_marks += c.marks, ++before_n;
      if (c.ts_us >= onset_us && c.ts_us <= onset_us + 10'000'000)
        after_marks += c.marks, after_packets += c.packets, ++after_n;
    }
    if (before_n > 0) before_marks /= before_n;
    if (after_n > 0) after_marks /= after_n, after_packets /= after_n;
    if (after_marks > 1.5 * before_marks + 0.001 * after_packets) continue;
    // What changed on its paths around the onset.
    const v1::ComponentChange* culprit = nullptr;
    std::vector<v1::ComponentChange> changes;
    for (v1::ComponentChange& c : components_.Changes(onset_us - kChangeLeadUs, onset_us + kChangeLagUs))
      if (fp.devices.count(c.device()) || fp.hosts.count(c.device())) changes.push_back(std::move(c));
    for (const v1::ComponentChange& c : changes)
      if (culprit == nullptr || std::abs(c.at_us() - onset_us) < std::abs(culprit->at_us() - onset_us)) culprit = &c;
    if (culprit == nullptr) continue;
    // The device's fault, not the job's: every job through it suffers it,
    // measurably slowed or not, and its diagnosis shows it.
    Hit h{"latency_regression", culprit->device(), v1::SEVERITY_WARNING, std::clamp(slowdown.drop, 0.0, 1.0), onset_us};
    constexpr size_t kShownChanges = 4;
    for (size_t i = 0; i < changes.size() && i < kShownChanges; ++i) {
      const v1::ComponentChange& c = changes[changes.size() - 1 - i];
      v1::Evidence ev;
      ev.set_entity(c.device());
      ev.set_counter("component_change");
      ev.set_peak_rate(static_cast<double>(onset_us - c.at_us()) / 1e6);
      ev.set_note(StrCat(ChangeArrow(c), " at ", FormatUtcTimeOfDay(c.at_us())));
      h.evidence.push_back(std::move(ev));
    }
    v1::Evidence quiet;
    quiet.set_entity(id);
    quiet.set_counter("path_ecn_marks_per_s");
    quiet.set_total(before_marks);
    quiet.set_peak_rate(after_marks);
    quiet.set_note(
        "ECN marks per second on the congested queues of its paths, the minute before the onset and the 10 s after");
    h.evidence.push_back(std::move(quiet));
    h.summary = StrCat("job ", id, "'s busbw fell ", Pct(slowdown.drop), " with no congestion, loss or error on its paths; ",
                       ChangeSentence(*culprit), ": a latency regression of the new version");
    hits->push_back(std::move(h));
  }
}

int Detectors::StreakNeeded(uint32_t ranks, size_t set) const {
  // The sets judged: one per size that leaves two ranks or more to compare with.
  const double tests = static_cast<double>(std::min<size_t>(kStragglerSets, ranks >= 2 ? ranks - 2 : 0));
  const double choices = Choose(ranks, set);
  if (tests < 1 || choices <= 1) return std::numeric_limits<int>::max();
  return 1 + static_cast<int>(std::ceil(std::log(tests / s_.straggler_p) / std::log(choices)));
}

void Detectors::JudgeFastest(BucketState& st, const std::vector<const CollRecord*>& ranks) {
  std::vector<const CollRecord*> order(ranks);
  std::sort(order.begin(), order.end(), [](const CollRecord* a, const CollRecord* b) {
    return a->exec_us != b->exec_us ? a->exec_us < b->exec_us : a->rank < b->rank;
  });
  for (size_t m = 1; m <= kStragglerSets; ++m) {
    FastSet& fs = st.fast_sets[m - 1];
    // Apart from the rest: the set's slowest below every other rank, and by
    // more than two robust standard deviations of theirs, so that ranks a
    // hair faster by their place in the ring are not the ones everyone
    // waits for. At least two others, for a median and a spread.
    if (order.size() < m + 2) {
      fs.streak = 0;
      continue;
    }
    std::vector<double> others;
    for (size_t i = m; i < order.size(); ++i) others.push_back(order[i]->exec_us);
    const double median = Median(others);
    const double last = order[m - 1]->exec_us;
    if (!(last < order[m]->exec_us && median - last > 2 * RobustSpread(others))) {
      fs.streak = 0;
      continue;
    }
    std::vector<const CollRecord*> set(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(m));
    std::sort(set.begin(), set.end(), [](const CollRecord* a, const CollRecord* b) { return a->rank < b->rank; });
    std::vector<uint32_t> ids;
    for (const CollRecord* r : set) ids.push_back(r->rank);
    // A streak counts collectives judged over the same set of ranks: one
    // begun while a host had not reported yet is not evidence over more.
    if (fs.streak > 0 && ids == fs.ranks && ranks.size() == fs.streak_ranks) {
      ++fs.streak;
    } else {
      fs.streak = 1;
      fs.ranks = ids;
      fs.streak_ranks = ranks.size();
      fs.since_us = order[0]->ts_us;
      fs.hosts.clear();
      for (const CollRecord* r : set) fs.hosts.push_back(r->host);
    }
    fs.exec.clear();
    for (const CollRecord* r : set) fs.exec.push_back(r->exec_us);
    fs.median = median;
  }
}

bool Detectors::DropCusum::Add(double x, double drop, size_t min_calm, double ceiling) {
  auto keep = [&] {
    calm.push_back(x);
    ++calm_since_fit;
    while (calm.size() > 600) calm.pop_front();
  };
  if (calm.size() < min_calm) return keep(), false;
  if (level == 0 || calm_since_fit >= 8) {
    const std::vector<double> v(calm.begin(), calm.end());
    level = Median(v);
    sigma = std::max(RobustSpread(v), drop * level / 4);
    calm_since_fit = 0;
  }
  if (level <= 0) return keep(), false;
  // Gaussian log-likelihood ratio of one sample: a level lower by delta
  // against the level.
  const double delta = drop * level;
  const double step = delta / (sigma * sigma) * (level - delta / 2 - x);
  const double before = llr;
  llr = std::max(0.0, llr + step);
  if (ceiling > 0) llr = std::min(llr, ceiling);
  if (llr == 0) keep();
  return before == 0 && llr > 0;
}

void Detectors::JudgeBusbw(BucketState& st, double busbw, int64_t ts_us) const {
  // Capped at twice the finding's ratio, so that recovery is as quick as onset.
  if (st.busbw.Add(busbw, s_.busbw_drop, s_.baseline_intervals, 2 * s_.regression_llr)) {
    st.onset_us = ts_us;
    st.since_sum = st.since_n = 0;
  }
  if (st.busbw.llr > 0) {
    st.since_sum += busbw;
    ++st.since_n;
    if (st.busbw.llr >= s_.regression_llr) JudgeFurtherDrop(st, busbw, ts_us);
  } else {
    // Healthy: a later drop is a new regression, not a further one.
    st.further = DropCusum();
    st.step_us = 0;
    st.step_from = st.step_sum = st.step_n = 0;
  }
}

// The regression's own test, once more, on the level the job regressed to:
// its samples since the regression was called make a level (the same
// count, median and noise floor), and a drop by busbw_drop of that level,
// as sure as the first (regression_llr), is a further change. A second
// cause that reaches a job already slowed then has an onset, which the
// diagnosis matches its findings against as it does the first.
void Detectors::JudgeFurtherDrop(BucketState& st, double busbw, int64_t ts_us) const {
  if (st.step_us != 0) st.step_sum += busbw, ++st.step_n;
  if (st.further.Add(busbw, s_.busbw_drop, s_.baseline_intervals, 0)) {
    st.step_onset_us = ts_us;
    st.pending_sum = st.pending_n = 0;
  }
  if (st.further.llr > 0) st.pending_sum += busbw, ++st.pending_n;
  if (st.further.llr >= s_.regression_llr) {
    st.step_us = st.step_onset_us;
    st.step_from = st.further.level;
    st.step_sum = st.pending_sum, st.step_n = st.pending_n;
    // The new level is learnt afresh, from what follows.
    st.further = DropCusum();
  }
}

void Detectors::DetectDrift(int64_t now_us, const FabricContext& context, std::vector<Hit>* hits) {
  if (!context.controller_reachable) return;
  std::set<std::string> seen;
  for (const v1::SwitchStatus& st : context.switch_status) {
    if (!st.drift()) continue;
    seen.insert(st.switch_name());
    auto [it, fresh] = drift_since_.emplace(st.switch_name(), now_us);
    // A rollout in flight drifts for seconds; only lasting drift counts.
    if (now_us - it->second < s_.drift_grace_us) continue;
    Hit h{"config_drift", st.switch_name(), v1::SEVERITY_WARNING, 1.0, it->second};
    v1::Evidence ev;
    ev.set_entity(st.switch_name());
    ev.set_counter("applied_generation");
    ev.set_total(static_cast<double>(st.desired_generation()));
    ev.set_peak_rate(static_cast<double>(st.applied_generation()));
    ev.set_note(StrCat("desired ", st.desired_generation(), " (", st.desired_hash().substr(0, 12), "), applied ",
                       st.applied_generation(), " (", st.applied_hash().substr(0, 12), ")",
                       st.error().empty() ? "" : StrCat(": ", st.error())));
    h.evidence.push_back(ev);
    h.summary = StrCat(st.switch_name(), " runs config generation ", st.applied_generation(),
                       " but the controller wants ", st.desired_generation());
    hits->push_back(std::move(h));
  }
  for (auto it = drift_since_.begin(); it != drift_since_.end();)
    it = seen.count(it->first) ? std::next(it) : drift_since_.erase(it);
}

std::string Detectors::Hit::Key() const {
  return job.empty() || job == entity ? StrCat(kind, "|", entity) : StrCat(kind, "|", entity, "|", job);
}

void Detectors::Hit::Absorb(Hit&& other) {
  for (v1::Evidence& ev : other.evidence) evidence.push_back(std::move(ev));
  summary = StrCat(summary, "; ", other.summary);
  magnitude = std::max(magnitude, other.magnitude);
  start_us = std::min(start_us, other.start_us);
}

void Detectors::AddOrAbsorb(Hit h, std::vector<Hit>* hits) {
  for (Hit& other : *hits)
    if (other.kind == h.kind && other.entity == h.entity) {
      other.Absorb(std::move(h));
      return;
    }
  hits->push_back(std::move(h));
}

std::map<std::string, Detectors::Slowdown> Detectors::SlowedJobs(const std::vector<Hit>& hits) {
  std::map<std::string, Slowdown> out;
  for (const Hit& h : hits) {
    if (h.kind != "busbw_regression") continue;
    auto [it, fresh] = out.try_emplace(h.job, Slowdown{h.start_us, h.magnitude});
    it->second.onset_us = std::min(it->second.onset_us, h.start_us);
    it->second.drop = std::max(it->second.drop, h.magnitude);
  }
  return out;
}

const v1::Job* Detectors::RunningJob(const FabricContext& context, const std::string& id) {
  for (const v1::Job& job : context.running_jobs)
    if (job.id() == id) return &job;
  return nullptr;
}

void MergeEvidence(const v1::Evidence& ev, v1::Anomaly* anomaly) {
  v1::Evidence* into = nullptr;
  v1::Evidence* weakest = nullptr;  // of ev's counter
  for (auto& existing : *anomaly->mutable_evidence()) {
    if (existing.counter() != ev.counter()) continue;
    if (existing.entity() == ev.entity()) into = &existing;
    if (weakest == nullptr || existing.peak_rate() < weakest->peak_rate()) weakest = &existing;
  }
  if (into == nullptr) {
    if (anomaly->evidence_size() < kMaxEvidence) *anomaly->add_evidence() = ev;
    else if (weakest != nullptr && ev.peak_rate() > weakest->peak_rate()) *weakest = ev;
    return;
  }
  // A counter's note describes its peak reading (a queue's depth when it
  // dropped fastest), not whichever read came last; the summary describes
  // the latest round, and says so where it quotes figures.
  bool describes = true;
  if (IsLevelEvidence(ev.counter())) {
    into->set_total(ev.total());
    into->set_peak_rate(ev.peak_rate());
    into->set_at_us(ev.at_us());
  } else {
    describes = ev.peak_rate() >= into->peak_rate();
    into->set_total(into->total() + ev.total());
    into->set_peak_rate(std::max(into->peak_rate(), ev.peak_rate()));
  }
  if (!ev.note().empty() && (describes || into->note().empty())) into->set_note(ev.note());
}

void Detectors::Track(int64_t now_us, std::vector<Hit> hits) {
  for (Hit& h : hits) {
    const std::string key = h.Key();
    auto it = active_.find(key);
    if (it == active_.end()) {
      Tracked t;
      t.anomaly.set_id(next_id_++);
      t.anomaly.set_kind(h.kind);
      t.anomaly.set_entity(h.entity);
      t.anomaly.set_start_us(h.start_us > 0 ? h.start_us : now_us);
      t.anomaly.set_detected_us(now_us);
      t.anomaly.set_job(h.job);
      it = active_.emplace(key, std::move(t)).first;
    }
    Tracked& t = it->second;
    v1::Anomaly& a = t.anomaly;
    t.last_hit_us = now_us;
    t.clear_after_us = h.clear_after_us > 0 ? h.clear_after_us : s_.clear_after_us;
    for (const v1::Evidence& ev : h.evidence) MergeEvidence(ev, &a);
    if (h.severity > a.severity()) a.set_severity(h.severity);
    a.set_magnitude(std::max(a.magnitude(), h.magnitude));
    a.set_summary(h.summary);
    a.set_updated_us(now_us);
    // Cause keys resolve below, once every hit of this round is tracked.
    a.set_caused_by(0);
    t.changed = true;
  }
  // Causes: the origin's id, when the origin is active.
  for (const Hit& h : hits) {
    if (h.cause_key.empty()) continue;
    auto self = active_.find(h.Key());
    auto cause = active_.find(h.cause_key);
    if (self != active_.end() && cause != active_.end() && cause != self)
      self->second.anomaly.set_caused_by(cause->second.anomaly.id());
  }
}

std::vector<v1::Anomaly> Detectors::Evaluate(int64_t now_us, const FabricContext& context) {
  std::vector<Hit> hits;
  DetectPorts(now_us, context, &hits);
  DetectJobs(now_us, context, &hits);
  DetectContention(context, &hits);
  DetectLatency(now_us, context, &hits);
  own_congested_.clear();  // it points into entities_
  std::set<std::string> running;
  for (const v1::Job& job : context.running_jobs) running.insert(job.id());
  for (auto it = footprints_.begin(); it != footprints_.end();)
    it = running.count(it->first) ? std::next(it) : footprints_.erase(it);
  DetectDrift(now_us, context, &hits);
  for (auto& [key, t] : active_) t.changed = false;
  Track(now_us, std::move(hits));
  for (auto& [key, e] : entities_) e.consumed_ts_us = std::max(e.consumed_ts_us, e.ts_us);

  std::vector<v1::Anomaly> changes;
  for (auto it = active_.begin(); it != active_.end();) {
    Tracked& t = it->second;
    if (t.last_hit_us < now_us && now_us - t.last_hit_us >= t.clear_after_us) {
      t.anomaly.set_end_us(t.last_hit_us);
      t.anomaly.set_updated_us(now_us);
      changes.push_back(t.anomaly);
      it = active_.erase(it);
      continue;
    }
    if (t.changed) changes.push_back(t.anomaly);
    ++it;
  }
  // Forget entities nobody reports any more, and jobs long silent.
  for (auto it = entities_.begin(); it != entities_.end();)
    it = now_us - it->second.ts_us > 3600LL * 1'000'000 ? entities_.erase(it) : std::next(it);
  for (auto it = jobs_.begin(); it != jobs_.end();)
    it = now_us - it->second.newest_us > 3600LL * 1'000'000 ? jobs_.erase(it) : std::next(it);
  return changes;
}

std::vector<JobSummary> Detectors::JobSummaries() const {
  std::vector<JobSummary> out;
  for (const auto& [id, job] : jobs_)
    for (const auto& [bucket, summary] : job.summary) {
      out.push_back(summary);
      out.back().stalled = job.stalled;
    }
  return out;
}

std::vector<v1::Anomaly> Detectors::Active() const {
  std::vector<v1::Anomaly> out;
  for (const auto& [key, t] : active_) out.push_back(t.anomaly);
  return out;
}

}  // namespace rocefab::collector
