#include "common/file_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "common/strings.h"
#include "tests/support/test_support.h"

namespace rocefab {
namespace {

// Dates a directory far in the past, so that the next change to it is
// certain to give it another mtime whatever the timestamp granularity.
void Backdate(const std::string& dir) {
  const timespec times[2] = {{1, 0}, {1, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, dir.c_str(), times, 0), 0);
}

constexpr int64_t kRediscoverUs = 30'000'000;

// Each case runs with inotify watches and with the stat(2) check that
// stands in where inotify is unavailable.
class FileCacheTest : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(WatchedOrStatted, FileCacheTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "inotify" : "stat"; });

TEST_P(FileCacheTest, AFileStaysOpenAndEachPollReadsItsCurrentValue) {
  testing::TempDir dir;
  testing::WriteFile(dir / "counters/rx", "1\n");
  Backdate(dir / "counters");
  FsRoot root(dir.path());
  FileCache files(root, kRediscoverUs, /*watch=*/GetParam());
  files.BeginPoll(1);
  EXPECT_EQ(*files.ReadFile("counters/rx"), "1\n");
  EXPECT_EQ(files.open_files(), 1u);
  // Written in place, as a sysfs attribute changes: same descriptor, new value.
  testing::WriteFile(dir / "counters/rx", "12345\n");
  files.BeginPoll(2);
  EXPECT_EQ(*files.ReadFile("counters/rx"), "12345\n");
  EXPECT_EQ(files.open_files(), 1u);
  EXPECT_EQ(files.changed_dirs(), 0u);
}

TEST_P(FileCacheTest, AFileReplacedByRenameIsOpenedAgain) {
  testing::TempDir dir;
  testing::WriteFile(dir / "counters/rx", "1\n");
  Backdate(dir / "counters");
  FsRoot root(dir.path());
  FileCache files(root, kRediscoverUs, /*watch=*/GetParam());
  files.BeginPoll(1);
  EXPECT_EQ(*files.ReadFile("counters/rx"), "1\n");
  ASSERT_TRUE(WriteFileAtomic(dir / "counters/rx", "2\n").ok());
  // Within the same poll the directory is not checked again.
  EXPECT_EQ(*files.ReadFile("counters/rx"), "1\n");
  files.BeginPoll(2);
  EXPECT_EQ(*files.ReadFile("counters/rx"), "2\n");
  EXPECT_EQ(files.changed_dirs(), 1u);
  EXPECT_EQ(files.open_files(), 1u);
  EXPECT_EQ(files.watched_dirs(), GetParam() ? 1u : 0u);
}

TEST_P(FileCacheTest, MissingFilesAndDirectoriesAreNotFoundUntilTheyAppear) {
  testing::TempDir dir;
  testing::WriteFile(dir / "counters/rx", "1\n");
  Backdate(dir / "counters");
  FsRoot root(dir.path());
  FileCache files(root, kRediscoverUs, /*watch=*/GetParam());
  files.BeginPoll(1);
  EXPECT_TRUE(absl::IsNotFound(files.ReadFile("counters/tx").status()));
  EXPECT_TRUE(absl::IsNotFound(files.ReadFile("nope/tx").status()));
  EXPECT_TRUE(absl::IsNotFound(files.ListDir("nope").status()));
  EXPECT_TRUE(absl::IsNotFound(files.ReadFile("counters/rx/child").status()));
  testing::WriteFile(dir / "counters/tx", "7\n");
  testing::WriteFile(dir / "nope/tx", "8\n");
  files.BeginPoll(2);
  EXPECT_EQ(*files.ReadFile("counters/tx"), "7\n");
  EXPECT_EQ(*files.ReadFile("nope/tx"), "8\n");
  // A directory that goes away closes its files and reads as missing.
  std::filesystem::remove_all(dir / "nope");
  files.BeginPoll(3);
  EXPECT_TRUE(absl::IsNotFound(files.ReadFile("nope/tx").status()));
  EXPECT_EQ(files.open_files(), 1u);
}

TEST_P(FileCacheTest, ListingsAreKeptUntilTheDirectoryChanges) {
  testing::TempDir dir;
  testing::WriteFile(dir / "class/mlx5_0/x", "");
  Backdate(dir / "class");
  FsRoot root(dir.path());
  FileCache files(root, kRediscoverUs, /*watch=*/GetParam());
  files.BeginPoll(1);
  EXPECT_EQ(*files.ListDir("class"), (std::vector<std::string>{"mlx5_0"}));
  std::filesystem::create_directories(dir / "class/mlx5_1");
  files.BeginPoll(2);
  EXPECT_EQ(*files.ListDir("class/"), (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
}

// Renames in quick succession may share one mtime: the watch still reports
// each, and without one a directory changed within a timestamp tick is read
// afresh.
TEST_P(FileCacheTest, AFileReplacedRepeatedlyWithinOneTimestampTickIsSeenEachTime) {
  testing::TempDir dir;
  testing::WriteFile(dir / "counters/rx", "1\n");
  FsRoot root(dir.path());
  FileCache files(root, kRediscoverUs, /*watch=*/GetParam());
  for (int i = 2; i < 50; ++i) {
    files.BeginPoll(i);
    ASSERT_TRUE(WriteFileAtomic(dir / "counters/rx", StrCat(i, "\n")).ok());
    files.BeginPoll(i);
    EXPECT_EQ(*files.ReadFile("counters/rx"), StrCat(i, "\n"));
  }
}

TEST(FileCache, EverythingIsRediscoveredOnSchedule) {
  testing::TempDir dir;
  testing::WriteFile(dir / "a/v", "1\n");
  FsRoot root(dir.path());
  FileCache files(root, /*rediscover_us=*/10);
  files.BeginPoll(100);
  EXPECT_EQ(*files.ReadFile("a/v"), "1\n");
  files.BeginPoll(105);
  EXPECT_EQ(files.open_files(), 1u);
  files.BeginPoll(110);
  EXPECT_EQ(files.open_files(), 0u);
  EXPECT_EQ(*files.ReadFile("a/v"), "1\n");
  // A clock that steps back rediscovers too.
  files.BeginPoll(50);
  EXPECT_EQ(files.open_files(), 0u);
}

TEST_P(FileCacheTest, ReadsWholeFilesLongerThanOnePage) {
  testing::TempDir dir;
  const std::string big(10000, 'x');
  testing::WriteFile(dir / "a/big", big);
  FsRoot root(dir.path());
  FileCache files(root, kRediscoverUs, /*watch=*/GetParam());
  files.BeginPoll(1);
  EXPECT_EQ(*files.ReadFile("a/big"), big);
  files.BeginPoll(2);
  EXPECT_EQ(*files.ReadFile("a/big"), big);
}

TEST_P(FileCacheTest, ADirectoryIsNotAFile) {
  testing::TempDir dir;
  testing::WriteFile(dir / "a/b/c", "1");
  FsRoot root(dir.path());
  FileCache files(root, kRediscoverUs, /*watch=*/GetParam());
  files.BeginPoll(1);
  const auto read = files.ReadFile("a/b");
  EXPECT_FALSE(read.ok());
  EXPECT_FALSE(absl::IsNotFound(read.status())) << read.status();
}

}  // namespace
}  // namespace rocefab
