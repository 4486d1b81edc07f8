// The built-in layers, each a Module with PyTorch's parameter layout and
// default initialisation (kaiming-uniform weights, uniform biases in
// +-1/sqrt(fan_in); unit/zero norms; normal embeddings).
#pragma once

#include <memory>
#include <vector>

#include "hpu/core/nn/module.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

class Linear : public Module {
 public:
  Linear(InitContext& ctx, std::int64_t in_features, std::int64_t out_features, bool bias = true);
  std::string typeName() const override { return "Linear"; }
  std::string describe() const override;
  Tensor forward(const Tensor& x) override { return ops::linear(x, weight, bias); }
  Tensor weight, bias;
};

class Conv2d : public Module {
 public:
  Conv2d(InitContext& ctx, std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size,
         std::int64_t stride = 1, std::int64_t padding = 0, bool bias = true);
  std::string typeName() const override { return "Conv2d"; }
  std::string describe() const override;
  Tensor forward(const Tensor& x) override { return ops::conv2d(x, weight, bias, options); }
  Tensor weight, bias;
  ops::Conv2dOptions options;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(ops::Pool2dOptions o) : options(o) {}
  std::string typeName() const override { return "MaxPool2d"; }
  std::string describe() const override;
  Tensor forward(const Tensor& x) override { return ops::maxPool2d(x, options); }
  ops::Pool2dOptions options;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(ops::Pool2dOptions o) : options(o) {}
  std::string typeName() const override { return "AvgPool2d"; }
  std::string describe() const override;
  Tensor forward(const Tensor& x) override { return ops::avgPool2d(x, options); }
  ops::Pool2dOptions options;
};

class Flatten : public Module {
 public:
  explicit Flatten(int start_dim = 1) : start_dim_(start_dim) {}
  std::string typeName() const override { return "Flatten"; }
  Tensor forward(const Tensor& x) override { return ops::flatten(x, start_dim_); }

 private:
  int start_dim_;
};

enum class ActivationKind { kReLU, kGELU, kGELUTanh, kTanh, kSigmoid };
class Activation : public Module {
 public:
  explicit Activation(ActivationKind kind) : kind_(kind) {}
  std::string typeName() const override;
  Tensor forward(const Tensor& x) override;

 private:
  ActivationKind kind_;
};

class Dropout : public Module {
 public:
  // Draws masks from `rng` (the trainer's dropout stream, checkpointed).
  Dropout(float p, Generator& rng) : p_(p), rng_(&rng) {}
  std::string typeName() const override { return "Dropout"; }
  std::string describe() const override;
  Tensor forward(const Tensor& x) override { return ops::dropout(x, p_, training(), *rng_); }

 private:
  float p_;
  Generator* rng_;
};

class LayerNorm : public Module {
 public:
  LayerNorm(InitContext& ctx, std::int64_t normalized_size, float eps = 1e-5f, bool affine = true);
  std::string typeName() const override { return "LayerNorm"; }
  Tensor forward(const Tensor& x) override { return ops::layerNorm(x, weight, bias, eps_); }
  Tensor weight, bias;

 private:
  float eps_;
};

class BatchNorm2d : public Module {
 public:
  BatchNorm2d(InitContext& ctx, std::int64_t num_features, float eps = 1e-5f, float momentum = 0.1f,
              bool affine = true);
  std::string typeName() const override { return "BatchNorm2d"; }
  Tensor forward(const Tensor& x) override {
    return ops::batchNorm2d(x, weight, bias, running_mean, running_var, training(), momentum_, eps_);
  }
  Tensor weight, bias, running_mean, running_var;

 private:
  float eps_, momentum_;
};

class Embedding : public Module {
 public:
  Embedding(InitContext& ctx, std::int64_t num_embeddings, std::int64_t embedding_dim);
  std::string typeName() const override { return "Embedding"; }
  Tensor forward(const Tensor& indices) override { return ops::embedding(indices, weight); }
  Tensor weight;
};

// Runs its children in order.
class Sequential : public Module {
 public:
  std::string typeName() const override { return "Sequential"; }
  void append(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;
  std::size_t size() const { return children().size(); }
};

}  // namespace hpu::core::nn
