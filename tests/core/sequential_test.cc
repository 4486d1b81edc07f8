// Sequential's shape inference refuses layers that do not fit their input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hpu/core/module/lightning_module.h"
#include "test_support.h"

namespace hpu::core {
namespace {

using testing::buildComponent;
using testing::errorOf;
using testing::testDevice;

void configure(const std::string& layers, const Shape& sample) {
  auto model = buildComponent<LightningModule>(config::ComponentKind::kModel,
                                               "class_path: Sequential\ninit_args:\n  layers: " + layers, "model");
  Generator init(1), dropout(2);
  nn::InitContext ctx{testDevice(), init, dropout};
  model->configureModel(ctx, {sample, 10});
}

TEST(Sequential, AWindowLargerThanItsInputIsRefusedEvenWhenTheStrideHidesIt) {
  // (3 - 4) / 2 + 1 is 1 with truncating division: the size check must not
  // rely on it.
  EXPECT_THAT(errorOf<UsageError>([] {
                configure("[{class_path: MaxPool2d, init_args: {kernel_size: 4, stride: 2}}]", Shape{1, 3, 3});
              }),
              ::testing::HasSubstr("kernel 4 does not fit the [1, 3, 3] input"));
  EXPECT_THAT(errorOf<UsageError>([] {
                configure("[{class_path: Conv2d, init_args: {out_channels: 2, kernel_size: 5, stride: 3}}]",
                          Shape{1, 4, 4});
              }),
              ::testing::HasSubstr("kernel 5 does not fit the [1, 4, 4] input"));
  configure("[{class_path: MaxPool2d, init_args: {kernel_size: 3, stride: 2}}, Flatten, "
            "{class_path: Linear, init_args: {out_features: 10}}]",
            Shape{1, 3, 3});
}

}  // namespace
}  // namespace hpu::core
