#include "hpu/device/text.h"

#include <gtest/gtest.h>

namespace hpu::device::detail {
namespace {

TEST(Text, SplitKeepsEmptyFields) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(split("a,,b", ','), (V{"a", "", "b"}));
  EXPECT_EQ(split("", ','), (V{""}));
  EXPECT_EQ(split("x,", ','), (V{"x", ""}));
  EXPECT_EQ(split("/tmp/r,true,64", ','), (V{"/tmp/r", "true", "64"}));
}

TEST(Text, TrimAndLower) {
  EXPECT_EQ(trim(" \t0,3 \n"), "0,3");
  EXPECT_EQ(trim("   "), "");
  EXPECT_EQ(toLower("GiB"), "gib");
}

}  // namespace
}  // namespace hpu::device::detail
