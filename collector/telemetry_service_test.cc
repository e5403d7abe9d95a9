// The Telemetry service with its real store, ingester and gRPC server on a
// loopback port, driven by the real shipper and by raw streams.
#include "collector/telemetry_service.h"

#include <gtest/gtest.h>

#include <cmath>

#include <grpcpp/generic/generic_stub.h>

#include "collector/latest_values.h"
#include "common/grpc_util.h"
#include "common/telemetry_shipper.h"
#include "tests/support/test_support.h"

namespace rocefab::collector {
namespace {

v1::TelemetryBatch ValidBatch(uint64_t seq) {
  v1::TelemetryBatch batch;
  batch.set_agent_id("z1-r01-h1");
  batch.set_agent_boot_id("boot-1");
  batch.set_seq(seq);
  auto* e = batch.add_entities();
  e->set_scope(v1::SCOPE_NIC);
  e->set_entity("z1-r01-h1/mlx5_0");
  e->set_port(1);
  e->set_timestamp_us(static_cast<int64_t>(seq) * 1'000'000);
  auto* s = e->add_samples();
  s->set_counter("rx_bytes");
  s->set_kind(v1::VALUE_KIND_COUNTER);
  s->set_value(seq * 4096);
  return batch;
}

TEST(ValidateBatch, AcceptsValidAndNamesWhatIsWrong) {
  EXPECT_EQ(ValidateBatch(ValidBatch(1)), "");
  v1::TelemetryBatch b = ValidBatch(0);
  EXPECT_NE(ValidateBatch(b).find("seq"), std::string::npos);
  b = ValidBatch(1);
  b.clear_agent_id();
  EXPECT_NE(ValidateBatch(b).find("agent_id"), std::string::npos);
  b = ValidBatch(1);
  b.set_agent_id("has space");
  EXPECT_NE(ValidateBatch(b), "");
  b = ValidBatch(1);
  b.clear_agent_boot_id();
  EXPECT_NE(ValidateBatch(b).find("agent_boot_id"), std::string::npos);
  b = ValidBatch(1);
  b.mutable_entities(0)->set_scope(static_cast<v1::Scope>(42));
  EXPECT_NE(ValidateBatch(b).find("scope"), std::string::npos);
  b = ValidBatch(1);
  b.mutable_entities(0)->mutable_samples(0)->set_prio(9);
  EXPECT_NE(ValidateBatch(b).find("prio 9"), std::string::npos);
  b = ValidBatch(1);
  b.mutable_entities(0)->mutable_samples(0)->clear_counter();
  EXPECT_NE(ValidateBatch(b).find("counter"), std::string::npos);
  b = ValidBatch(1);
  b.mutable_entities(0)->clear_entity();
  EXPECT_NE(ValidateBatch(b), "");
}

// One malformed NCCL record (an over-long job name, NaN timing) costs itself,
// not the host's batch: the NIC counters and the good records are stored.
TEST(ValidateBatch, ABadCollectiveRecordIsDroppedNotTheBatch) {
  v1::TelemetryBatch b = ValidBatch(1);
  for (int i = 0; i < 4; ++i) {
    auto* r = b.add_collectives();
    r->set_job(i == 1 ? std::string(300, 'j') : "4711");
    r->set_op("AllReduce");
    r->set_seq(static_cast<uint64_t>(i));
    r->set_busbw_gbs(i == 2 ? std::nan("") : 100);
  }
  EXPECT_NE(ValidateBatch(b), "") << "as sent, the batch would be refused";
  std::string why;
  EXPECT_EQ(DropBadCollectives(&b, &why), 2u);
  EXPECT_NE(why.find("over-long job"), std::string::npos) << why;
  EXPECT_EQ(ValidateBatch(b), "");
  ASSERT_EQ(b.collectives_size(), 2);
  EXPECT_EQ(b.collectives(0).seq(), 0u);
  EXPECT_EQ(b.collectives(1).seq(), 3u) << "the good records keep their order";
  EXPECT_EQ(b.entities_size(), 1) << "the NIC counters stay";
}

// A collector in this process: store, ingester and services on port 0.
class Collector {
 public:
  Collector(const std::string& db, const std::string& listen = "127.0.0.1:0")
      : registry_(std::make_shared<prometheus::Registry>()), metrics_(*registry_) {
    auto store = Store::Open({.path = db});
    EXPECT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    ingester_ = std::make_unique<Ingester>(Ingester::Options{}, *store_, nullptr, metrics_,
                                           SystemClock::Instance());
    agents_ = std::make_unique<AgentRegistry>(metrics_);
    service_ = std::make_unique<TelemetryService>(*ingester_, *agents_, metrics_, SystemClock::Instance(),
                                                  TelemetryService::Options{});
    ingester_->Start();
    auto server = StartGrpcServer(listen, {}, {service_.get()});
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = std::move(server->server);
    address_ = server->bound_address;
  }
  ~Collector() { Stop(); }
  void Stop() {
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      ingester_->Stop();
      server_->Wait();
      server_.reset();
    }
  }
  const std::string& address() const { return address_; }
  Store& store() { return *store_; }
  CollectorMetrics& metrics() { return metrics_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  CollectorMetrics metrics_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ingester> ingester_;
  std::unique_ptr<AgentRegistry> agents_;
  std::unique_ptr<TelemetryService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

v1::EntitySamples* Entity(v1::TelemetryBatch* b, const std::string& name, int64_t ts_us,
                          v1::Scope scope = v1::SCOPE_NIC) {
  auto* e = b->add_entities();
  e->set_scope(scope);
  e->set_entity(name);
  e->set_timestamp_us(ts_us);
  auto* sample = e->add_samples();
  sample->set_counter("rx_bytes");
  sample->set_value(1);
  return e;
}

// Before: one reading dated an hour ahead made every later real reading of
// its entity look like a replay (detectors keep the newest timestamp), and
// one future collective record pruned its job's window.
TEST(ScreenBatch, FutureDatesAreClippedOrDroppedAndPastOnesKept) {
  const int64_t now = 1'800'000'000'000'000;
  v1::TelemetryBatch b;
  Entity(&b, "h1/mlx5_0", now + 3600'000'000LL);   // an hour ahead: dropped
  Entity(&b, "h1/mlx5_1", now + 2'000'000);        // 2 s ahead: clipped to now
  Entity(&b, "h1/mlx5_2", now - 3600'000'000LL);   // a replay from the spool: kept
  auto* future = b.add_collectives();
  future->set_op("AllReduce");
  future->set_host("h1");
  future->set_timestamp_us(now + 86400'000'000LL);
  auto* fine = b.add_collectives();
  fine->set_op("AllReduce");
  fine->set_host("h1");
  fine->set_timestamp_us(now - 1000);
  const Screening s = ScreenBatch(&b, "", now, 10'000'000);
  EXPECT_EQ(s.future_dropped, 2u);
  EXPECT_EQ(s.future_clipped, 1u);
  ASSERT_EQ(b.entities_size(), 2);
  EXPECT_EQ(b.entities(0).entity(), "h1/mlx5_1");
  EXPECT_EQ(b.entities(0).timestamp_us(), now);
  EXPECT_EQ(b.entities(1).timestamp_us(), now - 3600'000'000LL);
  ASSERT_EQ(b.collectives_size(), 1);
  EXPECT_EQ(b.collectives(0).timestamp_us(), now - 1000);
  EXPECT_NE(s.first_problem.find("ahead of the collector's clock"), std::string::npos) << s.first_problem;
}

// A job name that is not UTF-8 (a dump directory's bytes) costs its record,
// not the batch.
TEST(ValidateBatch, ACollectiveRecordWhoseNamesAreNotUtf8IsDropped) {
  v1::TelemetryBatch b;
  for (const char* job : {"4711", "47\xff" "11", "\xc3\x28", "\xed\xa0\x80", "caf\xc3\xa9", "\xf0\x9f\x9a\x80"}) {
    auto* r = b.add_collectives();
    r->set_op("AllReduce");
    r->set_job(job);
  }
  std::string why;
  EXPECT_EQ(DropBadCollectives(&b, &why), 3u);
  EXPECT_NE(why.find("not UTF-8"), std::string::npos) << why;
  ASSERT_EQ(b.collectives_size(), 3);
  EXPECT_EQ(b.collectives(1).job(), "caf\xc3\xa9");
}

// Before: agent_id and entity names were whatever the sender wrote, so any
// agent could forge another host's NIC or a switch's link_flap.
TEST(ScreenBatch, OverLongOrTooManyComponentsAreDroppedAndTheRestKept) {
  v1::TelemetryBatch b;
  auto& c = *b.mutable_components();
  c["os"] = "lab-2.3";
  c[std::string(65, 'n')] = "1";
  c["kernel"] = std::string(129, 'v');
  c[""] = "x";
  const Screening s = ScreenBatch(&b, "", 0, 10'000'000);
  EXPECT_EQ(s.components_dropped, 3u);
  ASSERT_EQ(b.components().size(), 1u);
  EXPECT_EQ(b.components().at("os"), "lab-2.3");
  EXPECT_FALSE(s.first_problem.empty());
  v1::TelemetryBatch many;
  for (int i = 0; i < 100; ++i) (*many.mutable_components())["mlx5_" + std::to_string(i) + " firmware"] = "28.1";
  EXPECT_EQ(ScreenBatch(&many, "", 0, 10'000'000).components_dropped, 36u);
  EXPECT_EQ(many.components().size(), 64u);
}

TEST(ScreenBatch, AnAgentReportsOnlyWhatItsCertificateOwns) {
  const int64_t now = 1'800'000'000'000'000;
  v1::TelemetryBatch b;
  Entity(&b, "z1-r01-h1/mlx5_0", now);
  Entity(&b, "z1-r01-h2/mlx5_0", now);                         // another host's NIC
  Entity(&b, "z1-rtsw01/Ethernet12", now, v1::SCOPE_PORT);     // a switch port
  Entity(&b, "z1-r01-h1x/mlx5_0", now);                        // a prefix is not ownership
  for (const char* host : {"z1-r01-h1", "z1-r01-h1.cluster.example.net", "z1-r01-h2"}) {
    auto* r = b.add_collectives();
    r->set_op("AllReduce");
    r->set_host(host);
    r->set_timestamp_us(now);
  }
  const Screening s = ScreenBatch(&b, "z1-r01-h1", now, 10'000'000);
  EXPECT_EQ(s.foreign, 4u);
  ASSERT_EQ(b.entities_size(), 1);
  EXPECT_EQ(b.entities(0).entity(), "z1-r01-h1/mlx5_0");
  EXPECT_EQ(b.collectives_size(), 2) << "its own records, under its short name or FQDN";
  // The stream's screen refuses a batch in another agent's name outright.
  PushScreen screen("z1-r01-h1", 10'000'000);
  v1::TelemetryBatch forged;
  forged.set_agent_id("z1-rtsw01");
  forged.set_agent_boot_id("boot");
  forged.set_seq(1);
  EXPECT_NE(screen.Take(&forged, now).error.find("not this stream's certificate identity"), std::string::npos);
  EXPECT_FALSE(screen.started());
}

TEST(TelemetryService, RawStreamAcksStoredDuplicateAndRejected) {
  testing::TempDir dir;
  Collector collector(dir / "db");
  auto channel = *MakeChannel(collector.address(), {});
  auto stub = v1::Telemetry::NewStub(channel);
  grpc::ClientContext context;
  auto stream = stub->Push(&context);
  ASSERT_TRUE(stream->Write(ValidBatch(1)));
  v1::Ack ack;
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.seq(), 1u);
  EXPECT_EQ(ack.status(), v1::ACK_STATUS_STORED);
  ASSERT_TRUE(stream->Write(ValidBatch(1)));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.status(), v1::ACK_STATUS_DUPLICATE);
  v1::TelemetryBatch bad = ValidBatch(2);
  bad.mutable_entities(0)->mutable_samples(0)->set_prio(12);
  ASSERT_TRUE(stream->Write(bad));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.seq(), 2u);
  EXPECT_EQ(ack.status(), v1::ACK_STATUS_REJECTED);
  EXPECT_NE(ack.error().find("prio 12"), std::string::npos);
  v1::TelemetryBatch other_agent = ValidBatch(3);
  other_agent.set_agent_id("impostor");
  ASSERT_TRUE(stream->Write(other_agent));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.status(), v1::ACK_STATUS_REJECTED);
  // The stream still works after rejections.
  ASSERT_TRUE(stream->Write(ValidBatch(4)));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.seq(), 4u);
  EXPECT_EQ(ack.status(), v1::ACK_STATUS_STORED);
  stream->WritesDone();
  EXPECT_FALSE(stream->Read(&ack));
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(collector.metrics().batches_rejected.Value(), 2);
  EXPECT_EQ(collector.metrics().batches_duplicate.Value(), 1);
  EXPECT_EQ(collector.metrics().batches_stored.Value(), 2);
}

TEST(TelemetryService, GarbageBytesAreRefusedNotCrashed) {
  testing::TempDir dir;
  Collector collector(dir / "db");
  // A generic call carrying bytes that are not a TelemetryBatch.
  auto channel = *MakeChannel(collector.address(), {});
  grpc::GenericStub generic(channel);
  grpc::ClientContext context;
  grpc::CompletionQueue cq;
  auto call = generic.PrepareCall(&context, "/rocefab.v1.Telemetry/Push", &cq);
  call->StartCall(reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  ASSERT_TRUE(cq.Next(&tag, &ok));
  const std::string junk = "\xff\xff\xff\xff\x0f not a protobuf";
  grpc::Slice slice(junk);
  grpc::ByteBuffer buffer(&slice, 1);
  call->Write(buffer, reinterpret_cast<void*>(2));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(3));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  // Nothing of it was stored or acked.
  EXPECT_EQ(collector.metrics().batches_stored.Value(), 0);
  EXPECT_EQ(collector.store().ListAgents()->size(), 0u);
  // The collector still serves a well-formed stream.
  TelemetryShipper::Options options;
  options.target = collector.address();
  options.agent_id = "z1-r01-h1";
  TelemetryShipper shipper(options, SystemClock::Instance());
  ASSERT_TRUE(shipper.Start().ok());
  shipper.Enqueue(ValidBatch(1));
  EXPECT_TRUE(shipper.Flush(10'000'000));
}

TEST(TelemetryShipper, DeliversEverythingAcrossACollectorRestart) {
  testing::TempDir dir;
  auto collector = std::make_unique<Collector>(dir / "db");
  const std::string address = collector->address();
  TelemetryShipper::Options options;
  options.target = address;
  options.agent_id = "z1-r01-h1";
  options.initial_backoff_us = 20'000;
  options.max_backoff_us = 100'000;
  TelemetryShipper shipper(options, SystemClock::Instance());
  ASSERT_TRUE(shipper.Start().ok());
  for (uint64_t i = 1; i <= 20; ++i) shipper.Enqueue(ValidBatch(i));
  ASSERT_TRUE(shipper.Flush(10'000'000));
  EXPECT_EQ(shipper.stats().max_acked_seq, 20u);

  collector->Stop();
  collector.reset();
  for (uint64_t i = 21; i <= 40; ++i) shipper.Enqueue(ValidBatch(i));
  EXPECT_EQ(shipper.stats().pending, 20u);

  Collector restarted(dir / "db", address);
  ASSERT_EQ(restarted.address(), address);
  ASSERT_TRUE(shipper.Flush(20'000'000)) << "pending " << shipper.stats().pending;
  auto stats = shipper.stats();
  EXPECT_EQ(stats.max_acked_seq, 40u);
  EXPECT_EQ(stats.acked_stored + stats.acked_duplicate, 40u);
  EXPECT_GE(stats.stream_failures, 1u);
  shipper.Stop();

  auto agents = restarted.store().ListAgents();
  ASSERT_TRUE(agents.ok());
  ASSERT_EQ(agents->size(), 1u);
  EXPECT_EQ((*agents)[0].batches(), 40u);  // each batch stored exactly once
  EXPECT_EQ((*agents)[0].samples(), 40u);
  EXPECT_EQ((*agents)[0].last_seq(), 40u);
}

}  // namespace
}  // namespace rocefab::collector
