#include "common/telemetry_shipper.h"

#include <random>

#include "absl/strings/str_format.h"
#include "common/grpc_util.h"
#include "common/log.h"

namespace rocefab {
namespace {
constexpr char kTelemetryShipperLog[] = "shipper";
}

std::string NewBootId() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  uint64_t a = gen(), b = gen();
  // RFC 4122 version 4 layout.
  a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;
  b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", a >> 32, (a >> 16) & 0xffff, a & 0xffff,
                         b >> 48, b & 0xffffffffffffULL);
}

TelemetryShipper::TelemetryShipper(Options options, const Clock& clock)
    : options_(std::move(options)), clock_(clock) {
  if (options_.agent_boot_id.empty()) options_.agent_boot_id = NewBootId();
}

TelemetryShipper::~TelemetryShipper() { Stop(); }

absl::Status TelemetryShipper::Start() {
  auto channel = MakeChannel(options_.target, options_.tls, ChannelTraffic::kTrickle);
  if (!channel.ok()) return channel.status();
  channel_ = *channel;
  if (!options_.spool_dir.empty()) {
    auto spool = BatchSpool::Open(options_.spool_dir, options_.spool_max_bytes);
    if (!spool.ok()) return spool.status();
    spool_ = std::move(*spool);
    std::lock_guard lock(mu_);
    for (auto& [boot, queue] : spool_->Load(options_.agent_boot_id))
      for (auto& [seq, batch] : queue)
        earlier_[boot].emplace(seq, std::make_shared<const v1::TelemetryBatch>(std::move(batch)));
  }
  sender_ = std::thread([this] { SenderLoop(); });
  return absl::OkStatus();
}

uint64_t TelemetryShipper::Enqueue(v1::TelemetryBatch batch) {
  return Enqueue(std::make_shared<v1::TelemetryBatch>(std::move(batch)));
}

uint64_t TelemetryShipper::Enqueue(std::shared_ptr<v1::TelemetryBatch> batch) {
  std::lock_guard lock(mu_);
  const uint64_t seq = next_seq_++;
  batch->set_agent_id(options_.agent_id);
  batch->set_agent_boot_id(options_.agent_boot_id);
  batch->set_agent_kind(options_.agent_kind);
  batch->set_seq(seq);
  stats_.skipped_values += batch->health().skipped_values();
  stats_.parse_errors += batch->health().parse_errors();
  stats_.source_errors += batch->health().source_errors();
  v1::DeliveryStats* delivery = batch->mutable_delivery();
  delivery->set_stream_failures(stats_.stream_failures);
  delivery->set_dropped_overflow(stats_.dropped_overflow);
  delivery->set_rejected(stats_.rejected);
  delivery->set_pending(pending_.size());
  pending_.emplace(seq, std::move(batch));
  if (spool_) {
    const int64_t now = clock_.MonotonicUs();
    unspooled_.emplace(seq, now);
    SpoolOlderThan(now - options_.spool_after_us);
  }
  ++stats_.enqueued;
  stats_.last_seq = seq;
  while (pending_.size() > options_.max_pending) {
    if (spool_) {
      spool_->Remove(options_.agent_boot_id, pending_.begin()->first);
      unspooled_.erase(pending_.begin()->first);
    }
    if (stats_.dropped_overflow % 100 == 0)
      LOG_WARN(kTelemetryShipperLog, "collector ", options_.target, " unreachable and ", options_.max_pending,
               " batches queued: dropping the oldest (seq ", pending_.begin()->first, ")");
    pending_.erase(pending_.begin());
    ++stats_.dropped_overflow;
  }
  sender_cv_.notify_all();
  return seq;
}

bool TelemetryShipper::Flush(int64_t timeout_us) {
  std::unique_lock lock(mu_);
  return acked_cv_.wait_for(lock, std::chrono::microseconds(timeout_us),
                      [this] { return pending_.empty(); });
}

void TelemetryShipper::Stop() {
  {
    std::lock_guard lock(mu_);
    // Whatever is still unacked waits on disk for the next incarnation.
    if (spool_) SpoolOlderThan(INT64_MAX);
    stopping_ = true;
    if (live_context_ != nullptr) live_context_->TryCancel();
    sender_cv_.notify_all();
    acked_cv_.notify_all();
  }
  if (sender_.joinable()) sender_.join();
}

TelemetryShipper::Stats TelemetryShipper::stats() const {
  std::lock_guard lock(mu_);
  Stats copy = stats_;
  copy.pending = pending_.size();
  for (const auto& [boot, queue] : earlier_) copy.replay_pending += queue.size();
  if (spool_) {
    copy.spool_bytes = spool_->bytes();
    copy.spool_corrupt = spool_->corrupt();
  }
  return copy;
}

void TelemetryShipper::SpoolOlderThan(int64_t before_us) {
  while (!unspooled_.empty() && unspooled_.begin()->second <= before_us) {
    const uint64_t seq = unspooled_.begin()->first;
    unspooled_.erase(unspooled_.begin());
    auto it = pending_.find(seq);
    if (it != pending_.end()) DropEvicted(spool_->Put(*it->second));
  }
}

TelemetryShipper::Queue& TelemetryShipper::QueueOf(const std::string& boot) {
  if (boot == options_.agent_boot_id) return pending_;
  return earlier_[boot];
}

void TelemetryShipper::DropEvicted(const std::vector<std::pair<std::string, uint64_t>>& evicted) {
  for (const auto& [boot, seq] : evicted) {
    if (stats_.dropped_overflow % 100 == 0)
      LOG_WARN(kTelemetryShipperLog, "spool full (", options_.spool_max_bytes, " bytes): dropping the oldest batch (boot ",
               boot, " seq ", seq, ")");
    if (boot == options_.agent_boot_id) pending_.erase(seq);
    else if (auto it = earlier_.find(boot); it != earlier_.end()) it->second.erase(seq);
    ++stats_.dropped_overflow;
  }
}

void TelemetryShipper::HandleAck(const std::string& boot, const v1::Ack& ack) {
  std::lock_guard lock(mu_);
  if (boot != options_.agent_boot_id && !earlier_.count(boot)) return;  // delivered already
  Queue& queue = QueueOf(boot);
  auto it = queue.find(ack.seq());
  if (it == queue.end()) return;  // acked twice across a replay: harmless
  switch (ack.status()) {
    case v1::ACK_STATUS_STORED: ++stats_.acked_stored; break;
    case v1::ACK_STATUS_DUPLICATE: ++stats_.acked_duplicate; break;
    case v1::ACK_STATUS_REJECTED:
      ++stats_.rejected;
      LOG_ERROR(kTelemetryShipperLog, "collector rejected batch ", ack.seq(), ": ", ack.error());
      break;
    default:
      LOG_WARN(kTelemetryShipperLog, "ack for seq ", ack.seq(), " has unknown status ", ack.status());
      return;
  }
  if (boot == options_.agent_boot_id && ack.status() != v1::ACK_STATUS_REJECTED &&
      ack.seq() > stats_.max_acked_seq)
    stats_.max_acked_seq = ack.seq();
  queue.erase(it);
  if (spool_) {
    spool_->Remove(boot, ack.seq());
    if (boot == options_.agent_boot_id) unspooled_.erase(ack.seq());
  }
  acked_cv_.notify_all();
  // The sender waits on acks only to finish an earlier run's stream.
  if (boot != options_.agent_boot_id && queue.empty()) sender_cv_.notify_all();
}

bool TelemetryShipper::RunStream(v1::Telemetry::Stub& stub, const std::string& boot, bool finite) {
  grpc::ClientContext context;
  bool completed = false;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    live_context_ = &context;
    stream_broken_ = false;
    // Replay: everything still unacked goes out again, oldest first.
    const Queue& queue = QueueOf(boot);
    send_cursor_ = queue.empty() ? (finite ? 0 : next_seq_) : queue.begin()->first;
  }
  auto stream = stub.Push(&context);
  bool got_ack = false;
  std::thread reader([&] {
    v1::Ack ack;
    while (stream->Read(&ack)) {
      got_ack = true;
      HandleAck(boot, ack);
    }
    std::lock_guard lock(mu_);
    stream_broken_ = true;
    sender_cv_.notify_all();
  });
  {
    std::lock_guard lock(mu_);
    stats_.connected = true;
  }
  for (;;) {
    std::shared_ptr<const v1::TelemetryBatch> to_send;
    {
      std::unique_lock lock(mu_);
      Queue& queue = QueueOf(boot);
      sender_cv_.wait(lock, [&] {
        return stopping_ || stream_broken_ || queue.lower_bound(send_cursor_) != queue.end() ||
               (finite && queue.empty());
      });
      if (stopping_ || stream_broken_) break;
      if (finite && queue.empty()) {
        completed = true;
        break;
      }
      auto it = queue.lower_bound(send_cursor_);
      to_send = it->second;  // shared: the ack may erase the entry while we write
      send_cursor_ = it->first + 1;
    }
    if (!stream->Write(*to_send)) break;
    std::lock_guard lock(mu_);
    ++stats_.sent;
  }
  context.TryCancel();
  reader.join();
  grpc::Status status = stream->Finish();
  std::lock_guard lock(mu_);
  live_context_ = nullptr;
  stats_.connected = false;
  if (completed) {
    earlier_.erase(boot);
    LOG_INFO(kTelemetryShipperLog, "every batch of the earlier run ", boot, " is delivered");
  } else if (!stopping_) {
    ++stats_.stream_failures;
    LOG_WARN(kTelemetryShipperLog, "stream to collector ", options_.target, " ended: ",
             status.ok() ? "closed by collector" : status.error_message());
  }
  return got_ack;
}

void TelemetryShipper::SenderLoop() {
  auto stub = v1::Telemetry::NewStub(channel_);
  std::mt19937_64 jitter(std::random_device{}());
  int64_t backoff_us = options_.initial_backoff_us;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    // Earlier incarnations' batches first, each boot on a stream of its own.
    std::string boot = options_.agent_boot_id;
    bool finite = false;
    {
      std::lock_guard lock(mu_);
      if (!earlier_.empty()) {
        boot = earlier_.begin()->first;
        finite = true;
      }
    }
    const bool made_progress = RunStream(*stub, boot, finite);
    {
      std::lock_guard lock(mu_);
      // A delivered earlier boot: go straight on to the next stream.
      if (finite && !earlier_.count(boot)) {
        backoff_us = options_.initial_backoff_us;
        continue;
      }
    }
    if (made_progress) backoff_us = options_.initial_backoff_us;
    // Full jitter keeps thousands of agents from reconnecting in lockstep.
    const int64_t wait_us =
        backoff_us / 2 + static_cast<int64_t>(jitter() % static_cast<uint64_t>(backoff_us / 2 + 1));
    std::unique_lock lock(mu_);
    sender_cv_.wait_for(lock, std::chrono::microseconds(wait_us), [this] { return stopping_; });
    if (stopping_) return;
    backoff_us = std::min(backoff_us * 2, options_.max_backoff_us);
  }
}

}  // namespace rocefab
