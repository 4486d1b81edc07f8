// Settings of 16-mixed's loss scaler, shared by the precision plugin that
// applies them and the strategies whose configs set them.
#pragma once

namespace hpu::core {

// 16-mixed's dynamic loss scaling. The defaults are torch.cuda.amp.GradScaler's;
// a DeepSpeed config's fp16 section sets DeepSpeed's (loss_scale,
// initial_scale_power, loss_scale_window, hysteresis, min_loss_scale).
struct LossScalerOptions {
  float initial_scale = 65536.0f;
  bool dynamic = true;        // false: the scale stays initial_scale (DeepSpeed's loss_scale > 0)
  int growth_interval = 2000;  // clean steps before the scale doubles
  int hysteresis = 1;          // overflows tolerated before the scale halves (reset by a halving or growth)
  float min_scale = 0.0f;      // the scale never falls below this
};

}  // namespace hpu::core
