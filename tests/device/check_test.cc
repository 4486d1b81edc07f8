#include "hpu/device/check.h"

#include <gtest/gtest.h>

namespace hpu::device {
namespace {

int evaluations = 0;
int counted(int v) {
  ++evaluations;
  return v;
}

TEST(Check, PassingChecksDoNotEvaluateTheMessage) {
  evaluations = 0;
  HPU_CHECK(1 + 1 == 2, "never formatted {}", counted(1));
  HPU_CHECK(true);
  EXPECT_EQ(evaluations, 0);
}

TEST(Check, FailingChecksAbortWithLocationExpressionAndMessage) {
  const int size = 3;
  EXPECT_DEATH(HPU_CHECK(size > 4, "size {} too small", size),
               "check_test.cc:[0-9]+: check failed: size > 4: size 3 too small");
  EXPECT_DEATH(HPU_CHECK(size == 0), "check failed: size == 0\n");
}

}  // namespace
}  // namespace hpu::device
