#pragma once
// The collector's detectors (docs/diagnosis.md). Stored telemetry is fed in
// with Observe; Evaluate runs every detector over the latest interval of
// every entity (the hot window: what each agent reported last, plus the
// recent collective records of each job) and tracks anomalies through their
// life: opened on the first interval that shows them, kept while they show,
// closed after `clear_after` of quiet.
//
// Not thread-safe: the ingester thread owns it (Observe after each commit,
// Evaluate every `evaluate_every`).

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <string_view>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "collector/component_log.h"
#include "collector/diagnosis.h"
#include "common/strings.h"
#include "common/topology.h"
#include "rocefab/v1/config.pb.h"
#include "rocefab/v1/control.pb.h"
#include "rocefab/v1/diagnosis.pb.h"
#include "rocefab/v1/telemetry.pb.h"

namespace rocefab::collector {

// DetectorConfig with every default filled in (docs/diagnosis.md).
struct DetectorSettings {
  std::set<uint32_t> lossless_priorities = {3};
  double pause_ratio = 0.05;
  double storm_ratio = 0.2;
  uint64_t link_error_min = 10;
  uint64_t silent_loss_min = 10;
  double buffer_high_ratio = 0.8;
  uint64_t buffer_pool_bytes = 0;
  uint64_t deep_queue_bytes = 1'000'000;
  double busbw_drop = 0.1;
  uint32_t baseline_intervals = 20;  // healthy collectives before a baseline counts
  double regression_llr = 20;
  double straggler_p = 1e-8;
  int64_t stall_after_us = 5'000'000;
  double degraded_speed_ratio = 0.75;
  int64_t clear_after_us = 3'000'000;
  int64_t evaluate_every_us = 500'000;
  int64_t stale_after_us = 5'000'000;
  int64_t flap_window_us = 60'000'000;
  int64_t collective_window_us = 2'000'000;
  uint64_t lossless_drop_min = 1;
  int64_t drift_grace_us = 30'000'000;
  int64_t storm_pause_us = 150'000;
};

// Fills defaults and checks ranges; every problem is reported.
absl::StatusOr<DetectorSettings> ResolveDetectorSettings(const v1::DetectorConfig& config);

// What the detectors know beyond telemetry. Everything is optional.
struct FabricContext {
  std::shared_ptr<const Topology> topology;
  std::vector<v1::Job> running_jobs;              // the registry
  bool controller_reachable = false;
  std::vector<v1::SwitchStatus> switch_status;    // desired vs applied, per switch
};

// Folds one round's evidence into a tracked finding. The same entity and
// counter accumulate (a level keeps its latest reading, a count its sum
// and peak). A finding keeps at most kMaxEvidence entries: a long-lived
// one whose entities change round by round (the links two jobs share, a
// switch's congested uplinks) would otherwise grow with every one it ever
// named. Once full, a new entity replaces the one of its counter with the
// lowest peak, if its own is higher; other counters' entries stay.
inline constexpr int kMaxEvidence = 16;
void MergeEvidence(const v1::Evidence& ev, v1::Anomaly* anomaly);

// The canonical name of the link on `port` ("dev/port"): the end nearest the
// hosts (a NIC, else the lower switch tier), so both ends of a link report
// as one. `port` itself without a topology or a link.
std::string CanonicalLinkEnd(const Topology* topology, const std::string& port);

// A job's collectives as the detectors last judged them, per op and size.
struct JobSummary {
  std::string job, op, size;  // size: "2^28" (bytes, power-of-two bucket)
  double recent_busbw_gbs = 0, baseline_busbw_gbs = 0;
  bool regressed = false;
  bool stalled = false;
};

class Detectors final {
 public:
  explicit Detectors(DetectorSettings settings);

  // Takes in one stored batch.
  void Observe(const v1::TelemetryBatch& batch);
  // True once after an Observe whose fast-path readings took a lossless
  // priority past storm_pause: evaluate now, not at the next tick.
  bool TakeUrgent() { return std::exchange(urgent_, false); }

  // Runs the detectors as of `now_us` (Unix µs). Returns every anomaly that
  // opened, changed or closed in this evaluation, for the store.
  std::vector<v1::Anomaly> Evaluate(int64_t now_us, const FabricContext& context);

  // Anomalies open right now.
  std::vector<v1::Anomaly> Active() const;
  // The versions agents reported and their changes (thread-safe).
  const ComponentLog& components() const { return components_; }
  size_t active_count() const { return active_.size(); }
  std::vector<JobSummary> JobSummaries() const;
  // Ids continue after those already stored.
  void SetNextId(uint64_t id) { next_id_ = id; }
  const DetectorSettings& settings() const { return s_; }
  size_t entities() const { return entities_.size(); }

 private:
  struct Reading {
    double delta = 0;
    double value = 0;
    bool has_delta = false;
  };
  struct EntityState {
    EntityState() = default;
    // `shape` points into `series`: never copied.
    EntityState(const EntityState&) = delete;
    EntityState& operator=(const EntityState&) = delete;
    v1::Scope scope = v1::SCOPE_UNSPECIFIED;
    std::string entity;
    int64_t ts_us = 0, prev_ts_us = 0;
    int64_t before_prev_ts_us = 0;  // the full reading before prev_ts_us's
    int64_t consumed_ts_us = 0;  // evidence of this reading already counted
    std::unordered_map<std::string, Reading> series;
    struct ShapeEntry {
      std::string counter;
      int64_t prio, queue;
      Reading* slot;  // into `series`, whose nodes stay put
    };
    std::vector<ShapeEntry> shape;  // the last reading's series, in order
    // Find's answers for this reading, by interned key (a scan every 100 ms
    // then reads one small array, not the series map).
    mutable std::vector<const Reading*> memo;
    mutable int64_t memo_ts = -1;
    double max_rate = 0;         // highest link speed seen
    // Lossless queues (bit per priority) that reached deep_queue_bytes and
    // have not yet fallen below a quarter of it: congested, with hysteresis.
    uint32_t congested_prios = 0;
    std::deque<int64_t> downs;   // when the link went down
    // The PFC fast path (EntitySamples.fast): readings between full ones.
    int64_t fast_ts_us = 0;  // the last fast reading
    // Series -> the fast readings' deltas since the last full reading,
    // added to its delta so that it spans its whole interval.
    std::unordered_map<std::string, double> fast_pending;
    // Per priority: how long the port has paused its peer without a break,
    // up to its last reading of either kind.
    std::array<double, 8> unbroken_us{};
    std::array<int64_t, 8> pause_moved_us{};  // per priority: the last reading its tx pause grew
    double fast_tx_ratio = 0;  // lossless tx pause share of the last fast interval
    double fast_rx_ratio = 0;  // ... and rx: how much the port itself was paused
    // A NIC whose PFC stall prevention timed out (pause_storm_errors rose)
    // and that has dropped what it receives (rx_discards_phy) in every
    // reading since: it no longer pauses, so only this still names it.
    bool stall_dropping = false;
    // The NIC's stall prevention events in fast readings newer than the
    // full one (a 100 ms timeout fires before a second's poll).
    double fast_storm_warnings = 0, fast_storm_errors = 0;
  };
  struct CollRecord {
    int64_t ts_us;
    std::string comm;
    uint32_t rank, n_ranks;  // n_ranks: the communicator's size, as NCCL states it (0: not stated)
    std::string host;
    std::string op;
    uint64_t bytes;
    uint64_t seq;
    double busbw;
    double exec_us;
  };
  // One communicator's op and size bucket: its collectives judged in order.
  // Up to this many ranks of one job are judged stragglers at once: a set
  // of m ranks that were the m fastest, apart from the others, collective
  // after collective. Each m is one more test, so each is held to
  // straggler_p divided by the number of sets judged (Bonferroni).
  static constexpr size_t kStragglerSets = 3;
  struct FastSet {
    std::vector<uint32_t> ranks;    // ascending
    std::vector<std::string> hosts;  // of `ranks`, in their order
    std::vector<double> exec;        // their kernel times in the last collective
    int streak = 0;
    size_t streak_ranks = 0;  // how many ranks each collective of the streak had
    int64_t since_us = 0;
    double median = 0;  // the other ranks' median kernel time in the last collective
  };
  // A one-sided CUSUM for a drop below a level learnt from its own calm
  // samples: the level is their median, its noise their robust spread
  // floored at a quarter of the drop that matters (a noiseless history
  // must not make every wobble a change). A sample joins the calm ones only
  // while the CUSUM is 0, so a slow slide is never absorbed into the level.
  struct DropCusum {
    std::deque<double> calm;    // the last 600 calm samples
    size_t calm_since_fit = 0;  // calm samples added since level and sigma were computed
    double level = 0, sigma = 0;
    double llr = 0;             // log-likelihood ratio of "lower by `drop` of the level" vs "as before"
    // Judges one sample once `min_calm` calm ones make a level; `ceiling`
    // caps the CUSUM (0: uncapped). True when the CUSUM left 0 with it.
    bool Add(double x, double drop, size_t min_calm, double ceiling);
  };
  struct BucketState {
    uint64_t last_seq = 0;  // judged up to here
    // Its ranks: the size NCCL states, else the most seen reporting one
    // collective. A collective is complete, and the fastest rank judged,
    // only when this many have reported it.
    uint32_t ranks = 0;
    // busbw (the per-collective mean across ranks): its healthy level and
    // a CUSUM for a drop by busbw_drop.
    DropCusum busbw;
    int64_t onset_us = 0;        // when the CUSUM last left 0: the change point
    double since_sum = 0, since_n = 0;  // busbw since then
    // A further drop while regressed: the same CUSUM, against the level the
    // job regressed to, so that a second cause arriving on a slowed job has
    // an onset of its own.
    DropCusum further;
    int64_t step_onset_us = 0;          // when its CUSUM last left 0
    double pending_sum = 0, pending_n = 0;  // busbw since then
    // The newest further drop: when, from which level, and busbw since.
    int64_t step_us = 0;
    double step_from = 0, step_sum = 0, step_n = 0;
    // Stragglers: for each m up to kStragglerSets, the m ranks with the
    // shortest kernels while they are apart from the rest, and their streak.
    std::array<FastSet, kStragglerSets> fast_sets;
  };
  struct JobState {
    std::deque<CollRecord> records;
    int64_t newest_us = 0;
    int64_t first_us = 0;
    int64_t judged_until_us = 0;
    std::map<std::string, BucketState> buckets;   // comm + op/size bucket -> its judgement so far
    std::map<std::string, JobSummary> summary;    // comm + op/size bucket -> last judgement
    bool stalled = false;
    // Per evaluation: ECN marks and packets per second on the congested
    // queues of its paths (for latency_regression: did congestion move?).
    struct Congestion {
      int64_t ts_us;
      double marks, packets;
    };
    std::deque<Congestion> congestion;
  };
  struct Hit {
    Hit(std::string k, std::string e, v1::Severity sev, double mag, int64_t start)
        : kind(std::move(k)), entity(std::move(e)), severity(sev), magnitude(mag), start_us(start) {}
    std::string kind, entity;
    v1::Severity severity = v1::SEVERITY_WARNING;
    double magnitude = 0;
    int64_t start_us = 0;
    std::vector<v1::Evidence> evidence;
    std::string summary;
    std::string cause_key;
    std::string job;
    int64_t clear_after_us = 0;  // 0: the default
    // What tracks it: kind|entity, and the job when the hit is about one
    // job but names something else (a neighbour or a switch can slow
    // several jobs, each its own anomaly).
    std::string Key() const;
    // Takes in another finding on the same thing: its evidence, its summary
    // after this one's, the larger magnitude and the earlier start.
    void Absorb(Hit&& other);
  };
  // Adds `h` to `hits`, or folds it into the hit of its kind on its entity
  // already there (a switch judged by its uplinks and by the links toward
  // it: one finding, with both groups' evidence).
  static void AddOrAbsorb(Hit h, std::vector<Hit>* hits);
  // The jobs with a busbw_regression among `hits`: the earliest onset and
  // the largest drop of each.
  struct Slowdown {
    int64_t onset_us = 0;
    double drop = 0;
  };
  static std::map<std::string, Slowdown> SlowedJobs(const std::vector<Hit>& hits);
  static const v1::Job* RunningJob(const FabricContext& context, const std::string& id);
  struct Tracked {
    v1::Anomaly anomaly;
    int64_t last_hit_us = 0;       // evaluation time
    int64_t clear_after_us = 0;
    bool changed = false;
  };

  // The pause runs of a reading `since_us` after the entity's last one.
  // `read_before_us`: when the agent last read the counters, sent or not.
  void TrackUnbroken(EntityState& e, const v1::EntitySamples& es, double since_us, int64_t read_before_us,
                     bool fast);
  // The longest lossless pause run, as of the entity's last reading.
  double Unbroken(const EntityState& e) const;
  void DetectPorts(int64_t now_us, const FabricContext& context, std::vector<Hit>* hits);
  void DetectJobs(int64_t now_us, const FabricContext& context, std::vector<Hit>* hits);
  void DetectDrift(int64_t now_us, const FabricContext& context, std::vector<Hit>* hits);
  // job_contention: a slowed job whose congested links another job's
  // traffic, arrived at the slowdown's onset, shares.
  void DetectContention(const FabricContext& context, std::vector<Hit>* hits);
  // latency_regression: a job slowed for 20 s with no finding on its paths
  // and no more congestion on them than before, where a host or switch on
  // its paths reported a new version shortly before.
  void DetectLatency(int64_t now_us, const FabricContext& context, std::vector<Hit>* hits);
  // A running job's footprint, kept while its placement is unchanged.
  const Footprint& JobPaths(const Topology* topo, const v1::Job& job);
  void Track(int64_t now_us, std::vector<Hit> hits);
  void JudgeBusbw(BucketState& st, double busbw, int64_t ts_us) const;
  void JudgeFurtherDrop(BucketState& st, double busbw, int64_t ts_us) const;
  // Every device at the other end of one of `device`'s links that reports
  // was read at `ts_us` or later.
  bool PeersReadSince(const Topology* topo, const std::string& device, int64_t ts_us) const;
  static void JudgeFastest(BucketState& st, const std::vector<const CollRecord*>& ranks);
  // Consecutive collectives the same `set` ranks of `ranks` must be the
  // fastest in before chance (C(ranks, set)^(1 - streak)) falls below
  // straggler_p over the sets judged.
  int StreakNeeded(uint32_t ranks, size_t set) const;

  // Helpers over one entity's latest interval.
  bool Fresh(const EntityState& e, int64_t now_us) const;
  double IntervalUs(const EntityState& e) const;
  double Delta(const EntityState& e, std::string_view key) const;
  double LosslessDelta(const EntityState& e, const char* counter) const;
  const Reading* Find(const EntityState& e, std::string_view key) const;
  // Every series of `counter` on `e` (all its priorities and queues),
  // summed: their values and their deltas; `found` when there is one.
  struct Summed {
    double value = 0, delta = 0;
    bool found = false;
  };
  Summed SumSeries(const EntityState& e, std::string_view counter) const;
  // Evidence of `counter` on `e`, counting its delta once per reading.
  v1::Evidence Ev(const EntityState& e, const std::string& counter, double delta, double rate,
                  std::string note = "") const;

  DetectorSettings s_;
  bool urgent_ = false;
  // Keys Find was asked for, interned (observer thread only, as all
  // detection is).
  mutable StringMap<size_t> key_ids_;
  mutable std::map<std::string, std::vector<std::string>, std::less<>> lossless_keys_;
  std::unordered_map<std::string, EntityState> entities_;  // scope char + entity
  // Switch -> time of its latest reading with a deep lossless egress queue.
  std::unordered_map<std::string, int64_t> deep_seen_us_;
  // Device, or a port of a peer device, -> the entity of the pfc_misconfig
  // finding that explains drops on it, and when a port last reported PFC
  // off: a reading just after the setting is restored still counts drops
  // of an interval it was off in.
  struct PfcOffSeen {
    std::string entity;
    int64_t last_us = 0;
  };
  std::unordered_map<std::string, PfcOffSeen> pfc_off_seen_;
  // Switch egress ports congested on their own account in the last
  // DetectPorts (a lossless queue marking or deep, not held by pauses from
  // downstream), with their ECN marks and packets in the interval.
  struct Congested {
    const EntityState* e;
    double marks = 0, packets = 0;
  };
  std::unordered_map<std::string, Congested> own_congested_;
  // A group of links (a switch's uplinks, "<switch>|uplinks", or the links
  // toward it from the tier above, "<switch>") looked collided since the
  // evaluation whose newest reading was `newest_us`.
  struct CollisionSeen {
    int64_t newest_us = 0;
    int64_t start_us = 0;
  };
  std::unordered_map<std::string, CollisionSeen> collision_seen_;
  // Spine -> the uplink collision (its key) that last fed it, while that
  // collision is open: a collision toward a switch below is its consequence.
  std::unordered_map<std::string, std::string> uplinks_into_;
  std::map<std::string, std::pair<size_t, Footprint>> footprints_;  // job -> (its ranks, footprint)
  ComponentLog components_;
  std::string key_;  // reused by Observe
  std::map<std::string, JobState> jobs_;
  std::map<std::string, Tracked> active_;  // kind|entity
  std::map<std::string, int64_t> drift_since_;
  uint64_t next_id_ = 1;
};

}  // namespace rocefab::collector
