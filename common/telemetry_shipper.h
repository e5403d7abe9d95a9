#pragma once
// Ships telemetry batches from an agent to rocefab-collectord over the
// Telemetry.Push stream, with at-least-once delivery.
//
// Each batch gets the next sequence number of this agent incarnation and stays
// queued until the collector acks it (stored or duplicate). After a broken
// stream the shipper reconnects with exponential backoff and re-sends every
// unacked batch in order; the collector deduplicates by (agent, boot, seq).
// The queue is bounded: past max_pending the oldest batch is dropped and
// counted in stats().dropped_overflow.
//
// With a spool directory, a batch still unacked after `spool_after_us` goes
// to disk too (common/batch_spool.h), and so does every unacked batch at
// Stop(): a healthy stream writes no files, an outage or a restart loses
// none. A restarted agent first sends, on a stream of their own, the batches
// its earlier incarnations left, under their own boot id and seq, then its
// own. (A crash of the agent itself loses the unacked batches younger than
// `spool_after_us`.)
//
// Thread-safety: Enqueue, Flush, stats and Stop may be called from any
// thread. The shipper owns one sender thread and, while connected, one ack
// reader thread.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "common/batch_spool.h"
#include "common/clock.h"
#include "rocefab/v1/config.pb.h"
#include "rocefab/v1/telemetry.grpc.pb.h"

namespace rocefab {

// A fresh random id (UUID text) for an agent incarnation.
std::string NewBootId();

class TelemetryShipper final {
 public:
  struct Options {
    std::string target;  // collector host:port
    v1::TlsSettings tls;
    std::string agent_id;
    v1::AgentKind agent_kind = v1::AGENT_KIND_HOST;
    std::string agent_boot_id;  // NewBootId() when empty
    size_t max_pending = 3600;
    std::string spool_dir;                  // empty: memory only
    uint64_t spool_max_bytes = 256ULL << 20;
    int64_t spool_after_us = 2'000'000;  // unacked this long: to disk
    int64_t initial_backoff_us = 200'000;
    int64_t max_backoff_us = 10'000'000;
  };

  struct Stats {
    uint64_t enqueued = 0;
    uint64_t sent = 0;  // writes, replays included
    uint64_t acked_stored = 0;
    uint64_t acked_duplicate = 0;
    uint64_t rejected = 0;
    uint64_t dropped_overflow = 0;
    uint64_t stream_failures = 0;
    uint64_t max_acked_seq = 0;
    uint64_t last_seq = 0;
    size_t pending = 0;
    size_t replay_pending = 0;  // batches of earlier incarnations still to send
    uint64_t spool_bytes = 0;
    uint64_t spool_corrupt = 0;
    bool connected = false;
    // Sums of the enqueued batches' source health.
    uint64_t skipped_values = 0;
    uint64_t parse_errors = 0;
    uint64_t source_errors = 0;
  };

  TelemetryShipper(Options options, const Clock& clock);
  ~TelemetryShipper();
  TelemetryShipper(const TelemetryShipper&) = delete;
  TelemetryShipper& operator=(const TelemetryShipper&) = delete;

  // Loads the spool and starts the sender thread. Fails on bad TLS settings
  // or an unusable spool directory.
  absl::Status Start();
  // Stamps agent id, boot id and the next seq on `batch` and queues it.
  // Never blocks on the network. Returns the seq.
  uint64_t Enqueue(v1::TelemetryBatch batch);
  // The same for a batch the caller built in place (BatchBuilder::NewArenaBatch).
  uint64_t Enqueue(std::shared_ptr<v1::TelemetryBatch> batch);
  // Waits until every queued batch is acked, or `timeout_us` passes.
  // Returns true when nothing is pending.
  bool Flush(int64_t timeout_us);
  // Stops the threads. Unacked batches stay in the spool, if there is one;
  // otherwise they are lost (counted in stats()).
  void Stop();
  Stats stats() const;
  const std::string& agent_boot_id() const { return options_.agent_boot_id; }

 private:
  void SenderLoop();
  // By seq. Shared, so the sender writes a batch without copying it while
  // an ack may erase it from the queue.
  using Queue = std::map<uint64_t, std::shared_ptr<const v1::TelemetryBatch>>;
  // Runs one stream of `boot`'s batches until it breaks or Stop(); for an
  // earlier boot (`finite`) also once all of them are acked. Returns true if
  // any ack came.
  bool RunStream(v1::Telemetry::Stub& stub, const std::string& boot, bool finite);
  void HandleAck(const std::string& boot, const v1::Ack& ack);
  Queue& QueueOf(const std::string& boot);  // REQUIRES: mu_ held
  void DropEvicted(const std::vector<std::pair<std::string, uint64_t>>& evicted);  // REQUIRES: mu_
  // Spools this incarnation's batches enqueued before `before_us`
  // (monotonic); all of them with INT64_MAX. REQUIRES: mu_ held.
  void SpoolOlderThan(int64_t before_us);

  Options options_;
  const Clock& clock_;
  std::shared_ptr<grpc::Channel> channel_;

  mutable std::mutex mu_;
  // Separate, so that an ack does not wake the sender for nothing.
  std::condition_variable sender_cv_;  // a batch to send, a broken stream, Stop()
  std::condition_variable acked_cv_;   // acks, for Flush()
  Queue pending_;                        // this incarnation's
  std::map<std::string, Queue> earlier_;  // from the spool, by boot id
  std::unique_ptr<BatchSpool> spool_;
  std::map<uint64_t, int64_t> unspooled_;  // seq -> when it was enqueued (monotonic)
  uint64_t next_seq_ = 1;
  uint64_t send_cursor_ = 1;  // next seq to write on the current stream
  bool stream_broken_ = false;
  bool stopping_ = false;
  grpc::ClientContext* live_context_ = nullptr;
  Stats stats_;
  std::thread sender_;
};

}  // namespace rocefab
