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

}  // namespace
}  // namespace rocefab
