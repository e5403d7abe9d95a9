#include "agents/host/inspector_tailer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/test_support.h"

namespace rocefab::hostd {
namespace {

// One v4.0 line as NCCL 2.30 writes it (with comm_name), and one as 2.28
// writes it (without).
constexpr char kLine230[] =
    R"({"header":{"id":"0x7f8c496ae9f661","comm_name":"unknown","rank":2,"n_ranks":8,"nnodes":1},)"
    R"("metadata":{"inspector_output_format_version":"v4.0","git_rev":"v2.30.3-1","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1748030377748202,"hostname":"node001","pid":1639453},)"
    R"("coll_perf":{"coll":"AllReduce","coll_sn":1407,"coll_msg_size_bytes":1073741824,"coll_exec_time_us":4650,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":230.912220,"coll_busbw_gbs":404.096385}})";
constexpr char kLine228[] =
    R"({"header":{"id":"0x7f8c496ae9f661","rank":0,"n_ranks":8,"nnodes":1},)"
    R"("metadata":{"inspector_output_format_version":"v4.0","git_rev":"v2.28.3-1","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1748030377700000,"hostname":"node001","pid":1639451},)"
    R"("coll_perf":{"coll":"ReduceScatter","coll_sn":12,"coll_msg_size_bytes":1048576,"coll_exec_time_us":80,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":"nan","coll_busbw_gbs":"nan"}})";
constexpr char kP2p[] =
    R"({"header":{"id":"0x7f8c496ae9f661","comm_name":"unknown","rank":0,"n_ranks":8,"nnodes":1},)"
    R"("metadata":{"inspector_output_format_version":"v4.0","git_rev":"v2.30.3-1","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1748030377748655,"hostname":"node001","pid":1639451},)"
    R"("p2p_perf":{"p2p":"Send","p2p_sn":42,"p2p_peer":1,"p2p_msg_size_bytes":268435456,"p2p_exec_time_us":1154,"p2p_timing_source":"kernel_gpu","p2p_algobw_gbs":232.613047,"p2p_busbw_gbs":232.613047}})";

TEST(ParseInspectorLine, ReadsBothV4Shapes) {
  auto r = ParseInspectorLine(kLine230, "4711");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->job(), "4711");
  EXPECT_EQ(r->comm(), "0x7f8c496ae9f661");
  EXPECT_EQ(r->rank(), 2u);
  EXPECT_EQ(r->n_ranks(), 8u);
  EXPECT_EQ(r->host(), "node001");
  EXPECT_EQ(r->op(), "AllReduce");
  EXPECT_EQ(r->seq(), 1407u);
  EXPECT_EQ(r->bytes(), 1073741824u);
  EXPECT_DOUBLE_EQ(r->exec_time_us(), 4650);
  EXPECT_NEAR(r->busbw_gbs(), 404.096385, 1e-9);
  EXPECT_EQ(r->timestamp_us(), 1748030377748202);
  auto old = ParseInspectorLine(kLine228, "");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->op(), "ReduceScatter");
  EXPECT_EQ(old->busbw_gbs(), 0) << "\"nan\" stays unknown, not a number";
  auto p2p = ParseInspectorLine(kP2p, "");
  ASSERT_TRUE(p2p.ok()) << p2p.status();
  EXPECT_EQ(p2p->op(), "Send");
  EXPECT_EQ(p2p->seq(), 42u);
}

TEST(ParseInspectorLine, RejectsWhatIsNotARecord) {
  for (const char* bad : {"", "{", "[]", "null", R"({"header":{}})",
                          R"({"header":{"rank":1,"n_ranks":2},"metadata":{},"coll_perf":{"coll":"AllReduce"}})",
                          R"({"header":{"rank":-1,"n_ranks":2},"metadata":{},"coll_perf":{"coll":"X","coll_sn":1,"coll_msg_size_bytes":1,"coll_exec_time_us":1}})",
                          R"({"header":{"rank":1,"n_ranks":2},"metadata":{},"coll_perf":{"coll_sn":1,"coll_msg_size_bytes":1,"coll_exec_time_us":1}})"})
    EXPECT_FALSE(ParseInspectorLine(bad, "").ok()) << bad;
}

TEST(JobFromDumpDir, SlurmIdOrNothing) {
  EXPECT_EQ(JobFromDumpDir("nccl-inspector-4711"), "4711");
  EXPECT_EQ(JobFromDumpDir("nccl-inspector-unknown-jobid"), "");
  EXPECT_EQ(JobFromDumpDir("something-else"), "");
}

// A directory name is bytes, not UTF-8. A job name that is not valid UTF-8
// breaks every consumer that checks proto3 strings or writes JSON (and the
// collector drops such records); an over-long one is dropped there too.
// Neither leaves the agent: the registry's job for the host is used instead.
TEST(JobFromDumpDir, NamesThatCannotTravelAreLeftToTheRegistry) {
  EXPECT_EQ(JobFromDumpDir("nccl-inspector-47\xff" "11"), "");
  EXPECT_EQ(JobFromDumpDir("nccl-inspector-\xc3\x28"), "");
  EXPECT_EQ(JobFromDumpDir("nccl-inspector-" + std::string(200, '7')), "");
  EXPECT_EQ(JobFromDumpDir("nccl-inspector-job 7"), "") << "no spaces or control characters";
}

class Tailer : public ::testing::Test {
 protected:
  void Append(const std::string& text) {
    std::ofstream out(file_, std::ios::app | std::ios::binary);
    out << text;
  }
  testing::TempDir dir_;
  std::string file_ = dir_ / "nccl-inspector-4711/node001-pid1639453.log";
  InspectorTailer tailer_{{dir_ / "nccl-inspector-*"}};
  TailStats stats_;
};

TEST_F(Tailer, FollowsAppendsHoldsPartialLinesAndSkipsGarbage) {
  testing::WriteFile(file_, std::string(kLine230) + "\n");
  EXPECT_EQ(tailer_.Poll(&stats_).size(), 1u);
  EXPECT_TRUE(tailer_.Poll(&stats_).empty()) << "nothing new";
  // Half a line: held back until the writer finishes it.
  const std::string line(kLine228);
  Append(line.substr(0, 40));
  EXPECT_TRUE(tailer_.Poll(&stats_).empty());
  Append(line.substr(40) + "\nthis is not json\n" + kP2p + "\n");
  auto records = tailer_.Poll(&stats_);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].op(), "ReduceScatter");
  EXPECT_EQ(records[0].job(), "4711");
  EXPECT_EQ(records[1].op(), "Send");
  EXPECT_EQ(stats_.bad_lines, 1u);
  EXPECT_EQ(stats_.records, 3u);
  EXPECT_EQ(stats_.files, 1u);
}

TEST_F(Tailer, StartsOverOnTruncationAndRotation) {
  testing::WriteFile(file_, std::string(kLine230) + "\n" + kLine230 + "\n");
  EXPECT_EQ(tailer_.Poll(&stats_).size(), 2u);
  // Truncated (the plugin reopens with "w"), then one new line.
  testing::WriteFile(file_, std::string(kLine228) + "\n");
  auto after_truncate = tailer_.Poll(&stats_);
  ASSERT_EQ(after_truncate.size(), 1u);
  EXPECT_EQ(after_truncate[0].op(), "ReduceScatter");
  EXPECT_EQ(stats_.truncations + stats_.rotations, 1u);
  // Rotated: a new file renamed over the old one, longer than before.
  const std::string tmp = file_ + ".new";
  testing::WriteFile(tmp, std::string(kLine230) + "\n" + kLine230 + "\n" + kP2p + "\n");
  std::filesystem::rename(tmp, file_);
  EXPECT_EQ(tailer_.Poll(&stats_).size(), 3u);
  EXPECT_GE(stats_.rotations, 1u);
}

TEST_F(Tailer, AnEndlessLineIsDroppedNotHoarded) {
  testing::WriteFile(file_, std::string(70000, 'x'));
  EXPECT_TRUE(tailer_.Poll(&stats_).empty());
  EXPECT_EQ(stats_.bad_lines, 1u);
  Append(std::string("\n") + kLine230 + "\n");
  // The tail of the garbage line and then a good record.
  auto records = tailer_.Poll(&stats_);
  EXPECT_EQ(records.size(), 1u);
}

TEST_F(Tailer, NewDumpDirectoriesAppearAndVanishedOnesAreForgotten) {
  EXPECT_TRUE(tailer_.Poll(&stats_).empty());
  testing::WriteFile(dir_ / "nccl-inspector-unknown-jobid/node001-pid7.log", std::string(kLine230) + "\n");
  auto records = tailer_.Poll(&stats_);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].job(), "");
  std::filesystem::remove_all(dir_ / "nccl-inspector-unknown-jobid");
  tailer_.Poll(&stats_);
  EXPECT_EQ(stats_.files, 0u);
}

}  // namespace
}  // namespace rocefab::hostd
