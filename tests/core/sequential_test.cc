// Sequential's shape inference refuses layers that do not fit their input;
// neighbours that fuse run as one op, with the results of both in turn.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hpu/core/module/lightning_module.h"
#include "hpu/core/nn/layers.h"
#include "hpu/core/nn/sequential.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu/core/tensor/op_record.h"
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

// Records the modules its hooks see, in order.
struct HookLog final : nn::ForwardHooks {
  std::vector<std::string> events;
  void before(nn::Module& m) override { events.push_back("before " + m.typeName()); }
  void after(nn::Module& m) override { events.push_back("after " + m.typeName()); }
};

TEST(Sequential, FusedNeighboursRunAsOneOpWithTheResultsOfBoth) {
  // Conv2d + 2x2 MaxPool2d, and Linear + ReLU + Dropout.
  Generator init(1), dropout(2), data(3);
  nn::InitContext ctx{testDevice(), init, dropout};
  nn::Sequential net;
  net.append(std::make_shared<nn::Conv2d>(ctx, 2, 4, 3, 1, 1));
  net.append(std::make_shared<nn::MaxPool2d>(ops::Pool2dOptions{.kernel = 2}));
  net.append(std::make_shared<nn::Activation>(nn::ActivationKind::kReLU));
  net.append(std::make_shared<nn::Conv2d>(ctx, 4, 3, 3, 1, 1));
  net.append(std::make_shared<nn::MaxPool2d>(ops::Pool2dOptions{.kernel = 3, .stride = 2}));  // not 2x2: alone
  net.append(std::make_shared<nn::Flatten>());
  net.append(std::make_shared<nn::Linear>(ctx, 12, 5));
  net.append(std::make_shared<nn::Activation>(nn::ActivationKind::kReLU));
  net.append(std::make_shared<nn::Dropout>(0.4f, dropout));
  const Tensor x = testing::randomTensor({2, 2, 10, 10}, data);
  const auto run = [&](bool as_sequential) {
    for (const Tensor& p : net.parameters()) p.invalidateGrad();
    dropout = Generator(2);  // the same masks
    std::vector<ops::OpTraceEntry> trace;
    autograd::Tape tape;
    Tensor y;
    std::size_t backward_steps = 0;
    {
      ops::OpTraceScope traced(trace);
      autograd::TapeScope scope(&tape);
      y = x;
      if (as_sequential)
        y = net(y);
      else
        for (const auto& [name, child] : net.children()) y = (*child)(y);
      const Tensor loss = ops::sum(y);
      backward_steps = tape.size();
      tape.backward(loss);
    }
    std::vector<std::vector<float>> out{y.toHost()};
    for (const Tensor& p : net.parameters()) out.push_back(p.grad().toHost());
    std::vector<std::string> ops_run;
    for (const auto& e : trace) ops_run.push_back(e.op);
    return std::tuple(out, ops_run, backward_steps);
  };
  const auto [one_by_one, ops_one_by_one, steps_one_by_one] = run(false);
  const auto [fused, ops_fused, steps_fused] = run(true);
  EXPECT_EQ(steps_fused, steps_one_by_one - 3) << "one backward for each fused run of modules";
  EXPECT_EQ(fused, one_by_one);
  EXPECT_EQ(ops_fused, ops_one_by_one);
  EXPECT_THAT(ops_fused, ::testing::ElementsAre("conv2d", "max_pool2d", "relu", "conv2d", "max_pool2d", "linear",
                                                "relu", "dropout", "sum"));
  // Each module's output shape, the fused convolution's included.
  const auto& kids = net.children();
  EXPECT_EQ(kids[0].second->lastOutputShape(), (Shape{2, 4, 10, 10}));
  EXPECT_EQ(kids[1].second->lastOutputShape(), (Shape{2, 4, 5, 5}));
  EXPECT_EQ(kids[4].second->lastOutputShape(), (Shape{2, 3, 2, 2}));
  EXPECT_EQ(kids[6].second->lastOutputShape(), (Shape{2, 5}));
  EXPECT_EQ(kids[7].second->lastOutputShape(), (Shape{2, 5}));
  EXPECT_EQ(kids[8].second->lastOutputShape(), (Shape{2, 5}));
  // Both modules' hooks, nested as the fused op runs inside both.
  auto log = std::make_shared<HookLog>();
  net.setForwardHooks(log);
  net(x);
  EXPECT_THAT(log->events, ::testing::ElementsAre("before Sequential", "before Conv2d", "before MaxPool2d",
                                                  "after MaxPool2d", "after Conv2d", "before ReLU", "after ReLU",
                                                  "before Conv2d", "after Conv2d", "before MaxPool2d",
                                                  "after MaxPool2d", "before Flatten", "after Flatten",
                                                  "before Linear", "before ReLU", "before Dropout",
                                                  "after Dropout", "after ReLU", "after Linear", "after Sequential"));
}

}  // namespace
}  // namespace hpu::core
