#include "common/fs_root.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/test_support.h"

namespace rocefab {
namespace {

TEST(FsRoot, ResolvesUnderRoot) {
  EXPECT_EQ(FsRoot("/fixture/sys/").Resolve("class/infiniband"), "/fixture/sys/class/infiniband");
  EXPECT_EQ(FsRoot("/fixture/sys").Resolve("/class/net"), "/fixture/sys/class/net");
  EXPECT_EQ(FsRoot("/").Resolve("class/net"), "/class/net");
  EXPECT_EQ(FsRoot("").Resolve("proc/1"), "/proc/1");
}

TEST(FsRoot, TellsProcfsFromATreeStandingForIt) {
  testing::TempDir dir;
  testing::WriteFile(dir / "sys/kernel/random/boot_id", "00000000-0000-4000-8000-000000000001\n");
  EXPECT_FALSE(IsProcfsMount(dir.path()));
  EXPECT_FALSE(IsProcfsMount(dir / "missing"));
  if (!std::filesystem::exists("/proc/self")) GTEST_SKIP() << "procfs is not mounted at /proc here";
  EXPECT_TRUE(IsProcfsMount("/proc"));
}

TEST(FsRoot, ReadsAndListsFiles) {
  testing::TempDir dir;
  testing::WriteFile(dir / "a/b/value", "42\n");
  testing::WriteFile(dir / "a/c", "x");
  FsRoot root(dir.path());
  EXPECT_EQ(*root.ReadFile("a/b/value"), "42\n");
  auto listing = root.ListDir("a");
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ(*listing, (std::vector<std::string>{"b", "c"}));
  EXPECT_TRUE(root.Exists("a/c"));
  EXPECT_FALSE(root.Exists("a/d"));
}

TEST(FsRoot, MissingIsNotFound) {
  testing::TempDir dir;
  FsRoot root(dir.path());
  EXPECT_TRUE(absl::IsNotFound(root.ReadFile("nope").status()));
  EXPECT_TRUE(absl::IsNotFound(root.ListDir("nope").status()));
  // A path through a regular file is also "not found", not a crash.
  testing::WriteFile(dir / "file", "x");
  EXPECT_TRUE(absl::IsNotFound(root.ReadFile("file/child").status()));
}

TEST(FsRoot, DirectoryIsNotAFile) {
  testing::TempDir dir;
  testing::WriteFile(dir / "d/x", "1");
  EXPECT_FALSE(FsRoot(dir.path()).ReadFile("d").ok());
}

TEST(Trim, RemovesWhitespace) {
  EXPECT_EQ(Trim("  12 \n"), "12");
  EXPECT_EQ(TrimRight("name \r\n"), "name");
  EXPECT_EQ(Trim(""), "");
}

}  // namespace
}  // namespace rocefab
