// Shape-only devices: the same ops, graphs and device-memory events as a real
// device, no host storage and no arithmetic.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hpu/core/nn/flat_parameters.h"
#include "hpu/core/nn/layers.h"
#include "hpu/core/ops/ops.h"
#include "hpu/core/optim/optimizer.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu/device/device.h"
#include "hpu/device/errors.h"
#include "test_support.h"

namespace hpu::core {
namespace {

using autograd::Tape;
using autograd::TapeScope;

std::unique_ptr<device::Device> makeDevice(bool shape_only) {
  device::DeviceOptions o;
  o.memoryLimit = {96ull << 30, "gaudi2's 96 GiB of HBM"};
  o.shapeOnly = shape_only;
  return std::make_unique<device::Device>(0, 0, device::Generation::kGaudi2, o);
}

// A small CNN classifier's training step (conv, batch norm, pooling, dropout,
// linear, cross-entropy, backward, Adam) on `dev`; returns its graph ops.
std::uint64_t trainStep(device::Device& dev) {
  Generator rng(7), dropout_rng(8);
  nn::InitContext ctx{dev, rng, dropout_rng};
  nn::Sequential net;
  net.append(std::make_shared<nn::Conv2d>(ctx, 1, 4, 3, 1, 1));
  net.append(std::make_shared<nn::BatchNorm2d>(ctx, 4));
  net.append(std::make_shared<nn::Activation>(nn::ActivationKind::kReLU));
  net.append(std::make_shared<nn::MaxPool2d>(ops::Pool2dOptions{2}));
  net.append(std::make_shared<nn::Flatten>());
  net.append(std::make_shared<nn::Dropout>(0.25f, dropout_rng));
  net.append(std::make_shared<nn::Linear>(ctx, 4 * 4 * 4, 10));
  nn::FlatParameters params(net, dev, 1 << 10);
  auto adam = optim::makeAdam({});
  std::vector<optim::ParamSlice> slices;
  for (auto& b : params.buckets()) slices.push_back({b.valueSpan().data(), b.gradSpan().data(), b.numel, b.dtype});
  adam->attach(slices, dev);

  std::vector<float> x(8 * 64, 0.5f);
  std::vector<std::int64_t> y(8, 3);
  Tape tape;
  for (int step = 0; step < 2; ++step) {
    params.invalidateGrads();
    {
      TapeScope scope(&tape);
      Tensor loss = ops::crossEntropy(net(Tensor::fromHost(dev, {8, 1, 8, 8}, x)), Tensor::fromHost(dev, {8}, y));
      tape.backward(loss);
    }
    params.zeroMissingGrads();
    adam->step();
    dev.graph().markStep();
  }
  return dev.graph().stats().ops;
}

TEST(ShapeOnly, ATrainingStepHasTheSameDeviceMemoryEventsAndGraphAsOnARealDevice) {
  auto real = makeDevice(false), shape_only = makeDevice(true);
  const std::uint64_t real_ops = trainStep(*real);
  const std::uint64_t shape_only_ops = trainStep(*shape_only);
  EXPECT_EQ(shape_only_ops, real_ops);
  EXPECT_EQ(shape_only->graph().stats().compilations, real->graph().stats().compilations);
  const device::MemoryStats r = real->allocator().stats(), s = shape_only->allocator().stats();
  EXPECT_GT(r.numAllocs, 50u);
  EXPECT_EQ(s.numAllocs, r.numAllocs);
  EXPECT_EQ(s.numFrees, r.numFrees);
  EXPECT_EQ(s.activeAllocs, r.activeAllocs);
  EXPECT_EQ(s.inUse, r.inUse);
  EXPECT_EQ(s.maxInUse, r.maxInUse);
  EXPECT_EQ(s.maxAllocSize, r.maxAllocSize);
  // No host memory behind a shape-only device.
  EXPECT_GT(r.totalSystemAllocs, 0u);
  EXPECT_EQ(s.totalSystemAllocs, 0u);
  EXPECT_EQ(shape_only->allocator().cachedBytes(), 0u);
}

TEST(ShapeOnly, AModelLargerThanTheHostTracesWithItsFullDeviceMemory) {
  // 10^10 fp32 weights: 40 GB of device memory, more than this host has.
  auto dev = makeDevice(true);
  Generator rng(1), dropout_rng(2);
  nn::InitContext ctx{*dev, rng, dropout_rng};
  nn::Linear layer(ctx, 100000, 100000, /*bias=*/false);
  const Tensor x = Tensor::full(*dev, {4, 100000}, 1.0f);
  const Tensor y = layer(x);
  EXPECT_EQ(y.shape(), (Shape{4, 100000}));
  EXPECT_TRUE(y.shapeOnly());
  EXPECT_EQ(y.data(), nullptr);
  EXPECT_EQ(dev->allocator().stats().maxInUse, 40'000'000'000ull + 2 * 4 * 100000 * 4ull);
}

TEST(ShapeOnly, RunsOutOfDeviceMemoryWhereTheDeviceWould) {
  auto dev = makeDevice(true);
  Generator rng(1), dropout_rng(2);
  nn::InitContext ctx{*dev, rng, dropout_rng};
  nn::Linear a(ctx, 100000, 100000, false), b(ctx, 100000, 100000, false);  // 80 GB
  EXPECT_THROW(nn::Linear(ctx, 100000, 100000, false), device::OutOfMemoryError);  // 120 GB > 96 GiB
}

}  // namespace
}  // namespace hpu::core
