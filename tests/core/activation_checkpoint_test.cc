// Activation checkpointing: the same gradients as keeping activations
// (dropout masks included), less device memory held between forward and
// backward, and the saved input in host memory with cpu_checkpointing.
#include <gtest/gtest.h>

#include "hpu/core/nn/layers.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu/core/ops/ops.h"
#include "hpu/device/platform.h"

namespace hpu::core {
namespace {

class ActivationCheckpoint : public ::testing::Test {
 protected:
  device::Platform platform_ = device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}});
  device::Device& dev_ = platform_.device(0);
  Generator init_{3}, dropout_{4};
  nn::InitContext ctx_{dev_, init_, dropout_};
  std::shared_ptr<nn::Linear> l1_ = std::make_shared<nn::Linear>(ctx_, 16, 32);
  std::shared_ptr<nn::Linear> l2_ = std::make_shared<nn::Linear>(ctx_, 32, 16);

  std::vector<const Tensor*> params(const Tensor& x) { return {&l1_->weight, &l1_->bias, &l2_->weight, &l2_->bias, &x}; }

  Tensor block(const Tensor& x) { return (*l2_)(ops::dropout(ops::relu((*l1_)(x)), 0.3f, true, dropout_)); }

  Tensor input() {
    std::vector<float> v(8 * 16);
    for (float& x : v) x = init_.normal();
    Tensor t = Tensor::fromHost(dev_, {8, 16}, v);
    t.setRequiresGrad(true);
    return t;
  }

  // Loss and gradients of sum(block(x)^2), with or without checkpointing.
  std::vector<std::vector<float>> gradients(const Tensor& x, bool checkpointed, bool on_host,
                                            std::uint64_t* in_use_after_forward = nullptr) {
    for (const Tensor* p : params(x)) p->invalidateGrad();
    dropout_ = Generator(4);
    autograd::Tape tape;
    Tensor loss;
    {
      autograd::TapeScope scope(&tape);
      Tensor y = checkpointed ? ops::checkpoint([this](const Tensor& in) { return block(in); }, x, &dropout_, on_host)
                              : block(x);
      loss = ops::sum(ops::mul(y, y));
    }
    if (in_use_after_forward) *in_use_after_forward = dev_.allocator().stats().inUse;
    tape.backward(loss);
    std::vector<std::vector<float>> out;
    for (const Tensor* p : params(x)) out.push_back(p->grad().toHost());
    return out;
  }
};

TEST_F(ActivationCheckpoint, RecomputedGradientsEqualKeptOnes) {
  const Tensor x = input();
  const auto kept = gradients(x, false, false);
  EXPECT_EQ(gradients(x, true, false), kept);  // same masks, same arithmetic: bit-identical
  EXPECT_EQ(gradients(x, true, true), kept);
}

TEST_F(ActivationCheckpoint, HoldsLessDeviceMemoryUntilBackward) {
  const Tensor x = input();
  std::uint64_t kept = 0, recomputed = 0, on_host = 0;
  gradients(x, false, false, &kept);
  gradients(x, true, false, &recomputed);
  gradients(x, true, true, &on_host);
  // Kept: the block's activations (8x32 three times: linear, relu, dropout)
  // stay on the device until backward; checkpointed: none of them.
  EXPECT_GE(kept - recomputed, 3u * 8 * 32 * 4);
  // With the saved input in host memory the device holds the same: x stays
  // alive as the caller's tensor either way.
  EXPECT_EQ(on_host, recomputed);
}

TEST_F(ActivationCheckpoint, OutsideTrainingItIsAPlainCall) {
  const Tensor x = input();
  dropout_ = Generator(4);
  const auto plain = block(x).toHost();
  dropout_ = Generator(4);
  EXPECT_EQ(ops::checkpoint([this](const Tensor& in) { return block(in); }, x, &dropout_).toHost(), plain);
}

}  // namespace
}  // namespace hpu::core
