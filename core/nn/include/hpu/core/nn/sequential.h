// Sequential: runs its children in order, each on the output of the one
// before (torch.nn.Sequential). Children are named "0", "1", ... A child
// that fuses with the next (Module::fusesWith: a Conv2d and a 2x2
// MaxPool2d) runs both in one go.
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
    const auto& kids = children();
    for (std::size_t i = 0; i < kids.size(); ++i) {
      Module& m = *kids[i].second;
      if (i + 1 < kids.size() && m.fusesWith(*kids[i + 1].second))
        y = m.callFused(*kids[++i].second, y);
      else
        y = m(y);
    }
    return y;
  }
  std::size_t size() const { return children().size(); }
};

}  // namespace hpu::core::nn
