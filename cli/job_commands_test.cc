#include "cli/job_commands.h"

#include <gtest/gtest.h>

#include "cli/commands.h"

#include <sstream>

namespace rocefab::cli {
namespace {

TEST(ParseRanksFile, ReadsAndRejects) {
  auto job = ParseRanksFile("# rank host gpu nic\n0 z1-r01-h1 0 mlx5_0\n1,z1-r01-h1,1,mlx5_1\n\n", "r.txt");
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->ranks_size(), 2);
  EXPECT_EQ(job->ranks(1).nic(), "mlx5_1");
  auto bad = ParseRanksFile("0 z1-r01-h1 0 mlx5_0\nx z1 0 mlx5_1\n", "r.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("r.txt:2:"), std::string::npos);
  EXPECT_FALSE(ParseRanksFile("# nothing\n", "r.txt").ok());
  EXPECT_FALSE(ParseRanksFile("0 h 0\n", "r.txt").ok());
}

TEST(RanksFromHostlist, HostMajorRanks) {
  auto job = RanksFromHostlist("z1-r01-h[1-2]", 2, "");
  ASSERT_TRUE(job.ok());
  ASSERT_EQ(job->ranks_size(), 4);
  EXPECT_EQ(job->ranks(3).rank(), 3u);
  EXPECT_EQ(job->ranks(3).host(), "z1-r01-h2");
  EXPECT_EQ(job->ranks(3).gpu(), 1u);
  EXPECT_EQ(job->ranks(3).nic(), "mlx5_1");
  EXPECT_FALSE(RanksFromHostlist("h[1-2]", 0, "").ok());
  EXPECT_FALSE(RanksFromHostlist("h[", 8, "").ok());
  EXPECT_FALSE(RanksFromHostlist("h1", 8, "/nonexistent/topology.yaml").ok());
}

}  // namespace
}  // namespace rocefab::cli

namespace rocefab::cli {
namespace {

TEST(WithDefaultPort, AnAddressWithoutAPortGetsTheDaemonsPort) {
  EXPECT_EQ(WithDefaultPort("127.0.0.1", 9410), "127.0.0.1:9410");
  EXPECT_EQ(WithDefaultPort("collector.z1", 9410), "collector.z1:9410");
  EXPECT_EQ(WithDefaultPort("127.0.0.1:5000", 9410), "127.0.0.1:5000");
  EXPECT_EQ(WithDefaultPort("[::1]", 9412), "[::1]:9412");
  EXPECT_EQ(WithDefaultPort("[::1]:7", 9412), "[::1]:7");
  EXPECT_EQ(WithDefaultPort("::1", 9412), "[::1]:9412");
  EXPECT_EQ(WithDefaultPort("unix:/run/rocefab.sock", 9412), "unix:/run/rocefab.sock");
}

TEST(ExitCodeFor, ScriptsCanTellUnreachableFromRefusedFromNotFound) {
  EXPECT_EQ(ExitCodeFor(grpc::Status::OK), kExitOk);
  EXPECT_EQ(ExitCodeFor(grpc::Status(grpc::StatusCode::NOT_FOUND, "")), kExitNoResult);
  EXPECT_EQ(ExitCodeFor(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "")), kExitNoResult);
  EXPECT_EQ(ExitCodeFor(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "")), kExitUsage);
  EXPECT_EQ(ExitCodeFor(grpc::Status(grpc::StatusCode::UNAVAILABLE, "")), kExitUnreachable);
  EXPECT_EQ(ExitCodeFor(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "")), kExitUnreachable);
  EXPECT_EQ(ExitCodeFor(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "")), kExitDenied);
}

}  // namespace
}  // namespace rocefab::cli

namespace rocefab::cli {
namespace {

TEST(JobShowTable, BucketsWithoutRecordsAreStallsAndTheSlowestRankIsNamed) {
  v1::JobTimelineResponse response;
  const int64_t bucket = 5'000'000, t0 = 1'800'000'000'000'000;
  for (int64_t start : {t0, t0 + bucket, t0 + 5 * bucket}) {  // a 15 s hole after the second
    auto* p = response.add_points();
    p->set_start_us(start);
    p->set_op("AllReduce");
    p->set_records(64);
    p->set_ranks(8);
    p->set_mean_busbw_gbs(140);
    p->set_min_busbw_gbs(131.5);
    p->set_slowest_rank(5);
    p->set_slowest_rank_at("z1-r02-h1/gpu5");
  }
  int stalls = 0;
  const int64_t now = t0 + 6 * bucket + 1'000'000;  // in the 7th bucket: the 6th is the last whole one
  std::ostringstream out;
  JobShowTable(response, bucket, now, &stalls).Print(out);
  EXPECT_EQ(stalls, 3) << out.str();
  EXPECT_NE(out.str().find("z1-r02-h1/gpu5 (131.5 GB/s)"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("STALL"), std::string::npos) << out.str();
  // An ended job: no stall after its end.
  response.mutable_job()->set_end_us(t0 + 6 * bucket);
  JobShowTable(response, bucket, now + 60'000'000, &stalls);
  EXPECT_EQ(stalls, 3);
  // Records up to now: no stall.
  response.mutable_points()->DeleteSubrange(2, 1);
  for (int64_t start : {t0 + 2 * bucket, t0 + 3 * bucket, t0 + 4 * bucket, t0 + 5 * bucket}) {
    auto* p = response.add_points();
    p->set_start_us(start);
    p->set_op("AllReduce");
    p->set_records(1);
  }
  response.mutable_job()->set_end_us(0);
  JobShowTable(response, bucket, now, &stalls);
  EXPECT_EQ(stalls, 0);
}

}  // namespace
}  // namespace rocefab::cli
