#include "hpu/device/dtype.h"

#include <gtest/gtest.h>

namespace hpu::device {
namespace {

TEST(DType, SizesAreLogicalOnDeviceAndFloatOnHost) {
  EXPECT_EQ(logicalSize(DType::kBFloat16), 2u);
  EXPECT_EQ(physicalSize(DType::kBFloat16), 4u);
  EXPECT_EQ(logicalSize(DType::kFloat8E4M3), 1u);
  EXPECT_EQ(physicalSize(DType::kInt64), 8u);
}

TEST(DType, NamesRoundTripAndAliasesParse) {
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kFloat8E4M3,
                  DType::kFloat8E5M2, DType::kInt64, DType::kInt32, DType::kUInt8, DType::kBool,
                  DType::kFloat64})
    EXPECT_EQ(parseDType(dtypeName(t)), t) << dtypeName(t);
  EXPECT_EQ(parseDType("bf16"), DType::kBFloat16);
  EXPECT_EQ(parseDType("half"), DType::kFloat16);
  EXPECT_FALSE(parseDType("bfloat17").has_value());
}

}  // namespace
}  // namespace hpu::device
