// Sequential: runs its children in order, each on the output of the one
// before (torch.nn.Sequential). Children are named "0", "1", ...
#pragma once

#include <memory>

#include "hpu/core/nn/module.h"

namespace hpu::core::nn {

class Sequential : public Module {
 public:
  std::string typeName() const override { return "Sequential"; }
  void append(std::shared_ptr<Module> m) { registerModule(std::to_string(size()), std::move(m)); }
  Tensor forward(const Tensor& x) override {
    Tensor y = x;
    for (const auto& [name, child] : children()) y = (*child)(y);
    return y;
  }
  std::size_t size() const { return children().size(); }
};

}  // namespace hpu::core::nn
