#include "common/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/support/test_support.h"

namespace rocefab {
namespace {

// Captures what the logger writes to stderr.
std::string CaptureStderr(const std::function<void()>& body) {
  testing::TempDir dir;
  const std::string path = dir / "stderr";
  fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  FILE* file = fopen(path.c_str(), "w");
  dup2(fileno(file), STDERR_FILENO);
  body();
  dup2(saved, STDERR_FILENO);
  close(saved);
  fclose(file);
  return testing::ReadFile(path);
}

TEST(Log, JournalModeUsesPriorityPrefixes) {
  log::SetJournalMode(true);
  std::string text = CaptureStderr([] {
    LOG_WARN("hostd", "collector ", "down", " for ", 3, "s");
    LOG_ERROR("store", "disk full");
  });
  EXPECT_EQ(text, "<4>hostd: collector down for 3s\n<3>store: disk full\n");
}

TEST(Log, TerminalModeHasTimestampAndLevel) {
  log::SetJournalMode(false);
  std::string text = CaptureStderr([] { LOG_INFO("cli", "hello"); });
  ASSERT_GT(text.size(), 24u);
  EXPECT_EQ(text.substr(4, 1), "-");
  EXPECT_NE(text.find("Z I cli: hello\n"), std::string::npos) << text;
}

TEST(Log, LevelFilters) {
  log::SetJournalMode(true);
  log::SetMinLevel(log::Level::kWarning);
  std::string text = CaptureStderr([] {
    LOG_INFO("x", "dropped");
    LOG_DEBUG("x", "dropped");
    LOG_WARN("x", "kept");
  });
  log::SetMinLevel(log::Level::kInfo);
  EXPECT_EQ(text, "<4>x: kept\n");
}

TEST(Log, ParseLevel) {
  log::Level level;
  EXPECT_TRUE(log::ParseLevel("debug", &level));
  EXPECT_EQ(level, log::Level::kDebug);
  EXPECT_TRUE(log::ParseLevel("warning", &level));
  EXPECT_EQ(level, log::Level::kWarning);
  EXPECT_FALSE(log::ParseLevel("loud", &level));
}

}  // namespace
}  // namespace rocefab
