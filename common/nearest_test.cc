#include "common/nearest.h"

#include <gtest/gtest.h>

namespace rocefab {
namespace {

TEST(Nearest, EditDistanceCountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(EditDistance("health", "helth"), 1u);
  EXPECT_EQ(EditDistance("agent", "agents"), 1u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("Z1-R03-H1", "z1-r03-h1"), 0u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(Nearest, TheClosestNamesComeFirstAndPrefixesBreakTies) {
  const std::vector<std::string> hosts = {"z1-r01-h1", "z1-r09-h1", "z1-r19-h9", "z2-r99-h1"};
  EXPECT_EQ(NearestNames("z1-r99-h1", hosts, 2), (std::vector<std::string>{"z1-r09-h1", "z2-r99-h1"}));
  const std::vector<std::string> commands = {"alert", "agents", "counters"};
  EXPECT_EQ(NearestNames("agent", commands, 1), (std::vector<std::string>{"agents"}));
  EXPECT_EQ(NearestHint("x", {}), "");
  EXPECT_EQ(NearestHint("helth", {"health"}), "; nearest known: health");
}

}  // namespace
}  // namespace rocefab
