#include "hpu/core/optim/gradient_view.h"

#include <cmath>

namespace hpu::core::optim {

double gradientNorm(const GradientView& grads) {
  double squares = 0;
  for (std::size_t i = 0; i < grads.spans.size(); ++i) {
    const double weight = grads.weight(i);
    for (const float g : grads.spans[i]) squares += weight * (static_cast<double>(g) * g);
  }
  return std::sqrt(grads.total(squares));
}

}  // namespace hpu::core::optim
