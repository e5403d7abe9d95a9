#include "cli/playbook_commands.h"

#include <gtest/gtest.h>

namespace rocefab::cli {
namespace {

constexpr int64_t kNow = 1'800'000'000'000'000;

v1::PlaybookRun Recorded(const std::string& result, int64_t started_ago_s, int64_t heard_ago_s) {
  v1::PlaybookRun run;
  run.set_result(result);
  run.set_started_us(kNow - started_ago_s * 1'000'000);
  if (heard_ago_s >= 0) run.set_heard_us(kNow - heard_ago_s * 1'000'000);
  return run;
}

TEST(PlaybookRuns, ARunLongUnheardFromIsShownAsMaybeDeadWithItsChangesInPlace) {
  // Waiting for its jobs for ten minutes, and reported 20 s ago: alive.
  EXPECT_EQ(RunResultText(Recorded("running", 600, 20), kNow), "running");
  // Started ten minutes ago and silent for five: its process is likely gone.
  const std::string quiet = RunResultText(Recorded("running", 600, 300), kNow);
  EXPECT_TRUE(quiet.starts_with("running? last heard from 5m ago")) << quiet;
  EXPECT_NE(quiet.find("what it changed stays"), std::string::npos) << quiet;
  // A record from before heard_us: judged by its start.
  EXPECT_EQ(RunResultText(Recorded("running", 60, -1), kNow), "running");
  EXPECT_TRUE(RunResultText(Recorded("running", 3600, -1), kNow).starts_with("running? last heard from 60m ago"));
  // What has ended is shown as it ended, however old.
  EXPECT_EQ(RunResultText(Recorded("succeeded", 86400, 86000), kNow), "succeeded");
  EXPECT_EQ(RunResultText(Recorded("interrupted", 86400, 86000), kNow), "interrupted");
  v1::PlaybookRun dry = Recorded("dry_run", 86400, 86400);
  dry.set_dry_run(true);
  EXPECT_EQ(RunResultText(dry, kNow), "ok (dry run)");
  dry.set_result("refused");
  EXPECT_EQ(RunResultText(dry, kNow), "refused (dry run)");
}

}  // namespace
}  // namespace rocefab::cli
