#include "common/hostlist.h"

#include <gtest/gtest.h>

namespace rocefab {
namespace {

using V = std::vector<std::string>;

TEST(ExpandHostlist, SlurmForms) {
  EXPECT_EQ(*ExpandHostlist("z1-r01-h1"), V{"z1-r01-h1"});
  EXPECT_EQ(*ExpandHostlist("z1-r01-h[1-2],z1-r02-h1"), (V{"z1-r01-h1", "z1-r01-h2", "z1-r02-h1"}));
  EXPECT_EQ(*ExpandHostlist("n[01-03,7]"), (V{"n01", "n02", "n03", "n7"}));
  EXPECT_EQ(*ExpandHostlist("z1-r[01-02]-h[1-2]"),
            (V{"z1-r01-h1", "z1-r01-h2", "z1-r02-h1", "z1-r02-h2"}));
}

TEST(ExpandHostlist, RejectsMalformed) {
  for (const char* bad : {"", "a,,b", "h[", "h]", "h[]", "h[3-1]", "h[a-b]", "h[[1]]", "h[1-9999999999]"})
    EXPECT_FALSE(ExpandHostlist(bad).ok()) << bad;
  EXPECT_FALSE(ExpandHostlist("h[1-200]", 100).ok());
}

TEST(ExpandHostlist, GroupsMultiplyInSlurmOrder) {
  EXPECT_EQ(*ExpandHostlist("n[1-2,5]x[0-1]"), (V{"n1x0", "n1x1", "n2x0", "n2x1", "n5x0", "n5x1"}));
  EXPECT_EQ(*ExpandHostlist("[1-2]"), (V{"1", "2"}));
  EXPECT_EQ(*ExpandHostlist("a[9-10]b"), (V{"a9b", "a10b"}));
  EXPECT_EQ(*ExpandHostlist("a[009-010]"), (V{"a009", "a010"}));
}

TEST(ExpandHostlist, TheLimitCountsEveryNameBeforeAnyIsBuilt) {
  EXPECT_EQ(ExpandHostlist("h[1-50],g[1-50]", 100)->size(), 100u);
  EXPECT_FALSE(ExpandHostlist("h[1-50],g[1-51]", 100).ok());
  EXPECT_FALSE(ExpandHostlist("h[1-10][1-11]", 100).ok());
  // 2^40 names: refused from the count alone, at once.
  std::string wide;
  for (int i = 0; i < 40; ++i) wide += "x[0-1]";
  const auto refused = ExpandHostlist(wide);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("more than 100000 hosts"), std::string::npos);
}

}  // namespace
}  // namespace rocefab
