#include "collector/telemetry_service.h"

#include <deque>

#include "common/strings.h"
#include "common/counters.h"
#include "common/log.h"

namespace rocefab::collector {
namespace {

constexpr char kTelemetryServiceLog[] = "telemetry";

bool ValidName(const std::string& name, size_t max_len) {
  if (name.empty() || name.size() > max_len) return false;
  for (unsigned char c : name)
    if (c < 0x21 || c > 0x7e) return false;  // printable ASCII, no spaces
  return true;
}

// Keeps the elements `keep` says yes to, in order; returns how many went.
template <typename T, typename Keep>
size_t KeepIf(google::protobuf::RepeatedPtrField<T>* items, Keep keep) {
  const int before = items->size();
  int kept = 0;
  for (int i = 0; i < before; ++i) {
    if (!keep(*items->Mutable(i))) continue;
    if (kept != i) items->SwapElements(kept, i);
    ++kept;
  }
  items->DeleteSubrange(kept, before - kept);
  return static_cast<size_t>(before - kept);
}

// A stream refused before its first read.
class DeniedReactor final : public grpc::ServerBidiReactor<v1::TelemetryBatch, v1::Ack> {
 public:
  explicit DeniedReactor(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

class PushReactor final : public grpc::ServerBidiReactor<v1::TelemetryBatch, v1::Ack> {
 public:
  PushReactor(Ingester& ingester, AgentRegistry& agents, CollectorMetrics& metrics, const Clock& clock,
              std::string peer, std::string identity, int64_t max_future_us)
      : ingester_(ingester), agents_(agents), metrics_(metrics), clock_(clock), peer_(std::move(peer)),
        screen_(std::move(identity), max_future_us) {
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      std::unique_lock lock(mu_);
      reads_done_ = true;
      MaybeFinishLocked(lock);
      return;
    }
    const int64_t now_us = clock_.NowUs();
    const bool first = !screen_.started();
    const PushScreen::Outcome taken = screen_.Take(&incoming_, now_us);
    if (taken.bad_collectives > 0) {
      metrics_.collectives_dropped.Increment(static_cast<double>(taken.bad_collectives));
      LOG_WARN(kTelemetryServiceLog, "dropped ", taken.bad_collectives, " collective record(s) of batch seq ", incoming_.seq(),
               " from ", peer_, ": ", taken.bad_why);
    }
    const Screening& screened = taken.screening;
    if (screened.foreign) metrics_.records_foreign.Increment(static_cast<double>(screened.foreign));
    if (screened.future_dropped)
      metrics_.readings_future_dropped.Increment(static_cast<double>(screened.future_dropped));
    if (screened.future_clipped)
      metrics_.readings_future_clipped.Increment(static_cast<double>(screened.future_clipped));
    if (screened.components_dropped)
      metrics_.components_dropped.Increment(static_cast<double>(screened.components_dropped));
    if (!screened.first_problem.empty())
      LOG_WARN(kTelemetryServiceLog, "batch seq ", incoming_.seq(), " from ", peer_, ": ", screened.first_problem, " (",
               screened.foreign, " foreign, ", screened.future_dropped, " future-dated dropped)");
    if (taken.skew_us && taken.error.empty()) {
      // One gauge per stream: its agent id is fixed once the first batch is taken.
      if (skew_ == nullptr) skew_ = &metrics_.agent_clock_skew.Add({{"agent", incoming_.agent_id()}});
      skew_->Set(static_cast<double>(*taken.skew_us) / 1e6);
    }
    const std::string& error = taken.error;
    if (!error.empty()) {
      metrics_.batches_rejected.Increment();
      LOG_WARN(kTelemetryServiceLog, "rejected batch seq ", incoming_.seq(), " from ", peer_, ": ", error);
      v1::Ack ack;
      ack.set_seq(incoming_.seq());
      ack.set_status(v1::ACK_STATUS_REJECTED);
      ack.set_error(error);
      std::unique_lock lock(mu_);
      QueueAckLocked(std::move(ack), lock);
      lock.lock();
      if (!finishing_) StartRead(&incoming_);
      return;
    }
    if (first) {
      agent_id_ = incoming_.agent_id();
      agents_.Connected(agent_id_);
      LOG_INFO(kTelemetryServiceLog, "agent ", agent_id_, " connected from ", peer_);
    }
    const uint64_t seq = incoming_.seq();
    bool read_more;
    {
      std::lock_guard lock(mu_);
      ++in_flight_;
      read_more = in_flight_ < TelemetryService::kMaxInFlight;
      read_paused_ = !read_more;
    }
    ingester_.Submit(std::move(incoming_), [this, seq](bool stored, v1::AckStatus status) {
      OnCommitted(seq, stored, status);
    });
    incoming_.Clear();
    if (read_more) StartRead(&incoming_);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock lock(mu_);
    write_in_flight_ = false;
    if (!ok) {
      // The agent went away; the rest of its acks cannot be delivered and
      // it will replay those batches on its next stream.
      acks_.clear();
      write_failed_ = true;
    } else if (!acks_.empty()) {
      acks_.pop_front();
    }
    StartNextWriteLocked(lock);
  }

  void OnCancel() override {
    metrics_.streams_cancelled.Increment();
    LOG_INFO(kTelemetryServiceLog, "stream from ", agent_id_.empty() ? peer_ : agent_id_,
             " cancelled: the agent went away or the network broke");
  }

  void OnDone() override {
    std::unique_lock lock(mu_);
    done_ = true;
    if (!agent_id_.empty()) {
      agents_.Disconnected(agent_id_);
      LOG_INFO(kTelemetryServiceLog, "agent ", agent_id_, " disconnected");
    }
    const bool can_delete = in_flight_ == 0;
    lock.unlock();
    if (can_delete) delete this;
  }

 private:
  // Ingester thread.
  void OnCommitted(uint64_t seq, bool stored, v1::AckStatus status) {
    std::unique_lock lock(mu_);
    --in_flight_;
    if (done_) {
      const bool last = in_flight_ == 0;
      lock.unlock();
      if (last) delete this;
      return;
    }
    if (!stored) {
      // Not acking is the whole point: fail the stream so the agent
      // reconnects later and replays.
      store_failed_ = true;
      MaybeFinishLocked(lock);
      return;
    }
    const bool resume = read_paused_ && !reads_done_ && !finishing_;
    read_paused_ = false;
    v1::Ack ack;
    ack.set_seq(seq);
    ack.set_status(status);
    QueueAckLocked(std::move(ack), lock);
    if (resume) StartRead(&incoming_);
  }

  // Unlocks `lock`.
  void QueueAckLocked(v1::Ack ack, std::unique_lock<std::mutex>& lock) {
    if (!write_failed_ && !finishing_) acks_.push_back(std::move(ack));
    StartNextWriteLocked(lock);
  }

  // Unlocks `lock`.
  void StartNextWriteLocked(std::unique_lock<std::mutex>& lock) {
    if (!write_in_flight_ && !acks_.empty() && !finishing_) {
      write_in_flight_ = true;
      const v1::Ack* next = &acks_.front();  // stays put until OnWriteDone pops it
      lock.unlock();
      StartWrite(next);
      return;
    }
    MaybeFinishLocked(lock);
  }

  // Unlocks `lock`.
  void MaybeFinishLocked(std::unique_lock<std::mutex>& lock) {
    if (finishing_ || write_in_flight_) {
      lock.unlock();
      return;
    }
    grpc::Status status;
    if (store_failed_) {
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "collector store failed; retry later");
    } else if (!(reads_done_ && in_flight_ == 0 && acks_.empty())) {
      lock.unlock();
      return;
    }
    finishing_ = true;
    lock.unlock();
    Finish(status);
  }

  Ingester& ingester_;
  AgentRegistry& agents_;
  CollectorMetrics& metrics_;
  const Clock& clock_;
  const std::string peer_;
  PushScreen screen_;            // read path only
  prometheus::Gauge* skew_ = nullptr;  // read path only
  v1::TelemetryBatch incoming_;  // owned by the read path only
  std::string agent_id_;

  std::mutex mu_;
  std::deque<v1::Ack> acks_;  // front is being written when write_in_flight_
  int in_flight_ = 0;
  bool read_paused_ = false;
  bool reads_done_ = false;
  bool write_in_flight_ = false;
  bool write_failed_ = false;
  bool store_failed_ = false;
  bool finishing_ = false;
  bool done_ = false;
};

}  // namespace

std::string ValidateBatch(const v1::TelemetryBatch& batch) {
  if (!ValidName(batch.agent_id(), 253)) return "agent_id must be 1-253 printable characters";
  if (!ValidName(batch.agent_boot_id(), 64)) return "agent_boot_id must be 1-64 printable characters";
  if (batch.seq() == 0) return "seq must start at 1";
  if (batch.host_boot_id().size() > 64) return "host_boot_id is longer than 64 characters";
  for (const auto& entity : batch.entities()) {
    if (entity.scope() == v1::SCOPE_UNSPECIFIED || !v1::Scope_IsValid(entity.scope()))
      return StrCat("entity '", entity.entity(), "' has no valid scope");
    if (!ValidName(entity.entity(), 512))
      return "entity names must be 1-512 printable characters";
    for (const auto& sample : entity.samples()) {
      if (sample.counter().empty() || sample.counter().size() > 128)
        return StrCat("entity '", entity.entity(), "' has a sample without a counter name");
      if (sample.has_prio() && sample.prio() > 7)
        return StrCat("counter ", sample.counter(), ": prio ", sample.prio(), " is not 0-7");
    }
  }
  for (const auto& record : batch.collectives())
    if (std::string why = CollectiveProblem(record); !why.empty()) return why;
  return "";
}

namespace {

// Well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    size_t extra;
    uint32_t cp;
    if (c < 0x80) extra = 0, cp = c;
    else if ((c >> 5) == 0x6) extra = 1, cp = c & 0x1f;
    else if ((c >> 4) == 0xe) extra = 2, cp = c & 0x0f;
    else if ((c >> 3) == 0x1e) extra = 3, cp = c & 0x07;
    else return false;
    if (s.size() - i <= extra) return false;
    for (size_t k = 1; k <= extra; ++k) {
      const unsigned char cc = s[i + k];
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += extra + 1;
  }
  return true;
}

}  // namespace

std::string CollectiveProblem(const v1::CollectiveRecord& record) {
  if (record.job().size() > 128 || record.comm().size() > 64 || record.host().size() > 253 ||
      record.op().empty() || record.op().size() > 32)
    return "a collective record has an empty op or an over-long job, comm, host or op";
  if (!ValidUtf8(record.job()) || !ValidUtf8(record.comm()) || !ValidUtf8(record.host()) || !ValidUtf8(record.op()))
    return "a collective record's job, comm, host or op is not UTF-8";
  if (!(record.exec_time_us() >= 0) || !(record.busbw_gbs() >= 0) || !(record.algbw_gbs() >= 0))
    return StrCat("collective record ", record.op(), " #", record.seq(), " has negative or NaN timing");
  return "";
}

size_t DropBadCollectives(v1::TelemetryBatch* batch, std::string* first_problem) {
  return KeepIf(batch->mutable_collectives(), [&](const v1::CollectiveRecord& record) {
    std::string why = CollectiveProblem(record);
    if (why.empty()) return true;
    if (first_problem->empty()) *first_problem = std::move(why);
    return false;
  });
}

void AgentRegistry::Connected(const std::string& agent_id) {
  std::lock_guard lock(mu_);
  ++streams_[agent_id];
  metrics_.connected_agents.Set(static_cast<double>(streams_.size()));
}

void AgentRegistry::Disconnected(const std::string& agent_id) {
  std::lock_guard lock(mu_);
  auto it = streams_.find(agent_id);
  if (it != streams_.end() && --it->second <= 0) streams_.erase(it);
  metrics_.connected_agents.Set(static_cast<double>(streams_.size()));
}

bool AgentRegistry::IsConnected(const std::string& agent_id) const {
  std::lock_guard lock(mu_);
  return streams_.count(agent_id) > 0;
}

namespace {

bool SameHost(const std::string& record_host, const std::string& identity) {
  if (record_host == identity) return true;
  // An FQDN of the short name, or the short name of an FQDN identity.
  const std::string a = record_host.substr(0, record_host.find('.'));
  const std::string b = identity.substr(0, identity.find('.'));
  return a == b && (a.size() == record_host.size() || b.size() == identity.size());
}

}  // namespace

PushScreen::Outcome PushScreen::Take(v1::TelemetryBatch* batch, int64_t now_us) {
  Outcome out;
  // A bad collective record costs itself, not the batch (and the NIC
  // counters in it): it is dropped and counted.
  out.bad_collectives = DropBadCollectives(batch, &out.bad_why);
  if (!identity_.empty() && batch->agent_id() != identity_) {
    out.error = StrCat("agent_id '", batch->agent_id(), "' is not this stream's certificate identity '", identity_, "'");
    return out;
  }
  if (ValidName(batch->agent_id(), 253)) out.skew_us = batch->created_us() - now_us;
  out.screening = ScreenBatch(batch, identity_, now_us, max_future_us_);
  out.error = ValidateBatch(*batch);
  if (out.error.empty() && started() && (batch->agent_id() != agent_id_ || batch->agent_boot_id() != boot_id_))
    out.error = "agent id or boot id changed within one stream";
  if (out.error.empty() && !started()) {
    agent_id_ = batch->agent_id();
    boot_id_ = batch->agent_boot_id();
  }
  return out;
}

Screening ScreenBatch(v1::TelemetryBatch* batch, const std::string& identity, int64_t now_us,
                      int64_t max_future_us) {
  Screening out;
  auto note = [&](std::string problem) {
    if (out.first_problem.empty()) out.first_problem = std::move(problem);
  };
  // Future dates: false past the bound (counted as dropped); clipped to the
  // receive time inside it.
  auto in_time = [&](int64_t* ts_us) {
    if (*ts_us > now_us + max_future_us) {
      ++out.future_dropped;
      return false;
    }
    if (*ts_us > now_us) {
      *ts_us = now_us;
      ++out.future_clipped;
    }
    return true;
  };
  auto ahead = [&](int64_t ts_us) {
    return StrCat(" is dated ", (ts_us - now_us) / 1'000'000, " s ahead of the collector's clock");
  };
  const std::string prefix = identity + "/";
  KeepIf(batch->mutable_entities(), [&](v1::EntitySamples& e) {
    if (!identity.empty() && e.scope() != v1::SCOPE_COLL && !e.entity().starts_with(prefix)) {
      note(StrCat("entity '", e.entity(), "' is not under '", prefix, "'"));
      ++out.foreign;
      return false;
    }
    int64_t ts = e.timestamp_us();
    if (!in_time(&ts)) {
      note(StrCat("entity '", e.entity(), "'", ahead(ts)));
      return false;
    }
    e.set_timestamp_us(ts);
    return true;
  });
  KeepIf(batch->mutable_collectives(), [&](v1::CollectiveRecord& r) {
    if (!identity.empty() && !SameHost(r.host(), identity)) {
      note(StrCat("a collective record of host '", r.host(), "' came from '", identity, "'"));
      ++out.foreign;
      return false;
    }
    int64_t ts = r.timestamp_us();
    if (!in_time(&ts)) {
      note(StrCat("collective record ", r.op(), " #", r.seq(), ahead(ts)));
      return false;
    }
    r.set_timestamp_us(ts);
    return true;
  });
  // Versions: bounded names and values, at most 64 of them.
  constexpr size_t kMaxComponents = 64, kMaxName = 64, kMaxVersion = 128;
  auto* components = batch->mutable_components();
  for (auto it = components->begin(); it != components->end();) {
    const bool bad = it->first.empty() || it->first.size() > kMaxName || it->second.size() > kMaxVersion;
    if (bad) note(StrCat("component '", it->first.substr(0, kMaxName), "' has an over-long name or version"));
    it = bad ? components->erase(it) : std::next(it);
    out.components_dropped += bad;
  }
  while (components->size() > kMaxComponents) {
    note(StrCat("more than ", kMaxComponents, " components"));
    components->erase(components->begin());
    ++out.components_dropped;
  }
  return out;
}

grpc::ServerBidiReactor<v1::TelemetryBatch, v1::Ack>* TelemetryService::Push(
    grpc::CallbackServerContext* context) {
  std::string identity;
  if (options_.authorizer != nullptr) {
    grpc::Status allowed = options_.authorizer->Check(context, "/rocefab.v1.Telemetry/Push", &identity);
    if (!allowed.ok()) return new DeniedReactor(std::move(allowed));
    if (!options_.authorizer->enforcing()) identity.clear();
  }
  return new PushReactor(ingester_, agents_, metrics_, clock_, context->peer(), std::move(identity),
                         options_.max_future_us);
}

}  // namespace rocefab::collector
