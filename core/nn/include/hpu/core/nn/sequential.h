// Sequential: runs its children in order, each on the output of the one
// before (torch.nn.Sequential). Children are named "0", "1", ... A child
// that fuses with the ones after it (Module::fusesWith: a Conv2d and a 2x2
// MaxPool2d; a Linear, a ReLU and a Dropout) runs them in one go.
#pragma once

#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "hpu/core/nn/module.h"

namespace hpu::core::nn {

class Sequential : public Module {
 public:
  std::string typeName() const override { return "Sequential"; }
  void append(std::shared_ptr<Module> m) { registerModule(std::to_string(size()), std::move(m)); }
  Tensor forward(const Tensor& x) override {
    constexpr std::size_t kMaxFused = 2;  // modules after one that it may fuse
    Tensor y = x;
    const auto& kids = children();
    std::vector<Module*> next;
    for (std::size_t i = 0; i < kids.size(); ++i) {
      next.clear();
      for (std::size_t j = i + 1; j < std::min(kids.size(), i + 1 + kMaxFused); ++j) next.push_back(kids[j].second.get());
      Module& m = *kids[i].second;
      if (const std::size_t fused = m.fusesWith(next); fused > 0) {
        y = m.callFused(std::span<Module* const>(next.data(), fused), y);
        i += fused;
      } else {
        y = m(y);
      }
    }
    return y;
  }
  std::size_t size() const { return children().size(); }
};

}  // namespace hpu::core::nn
