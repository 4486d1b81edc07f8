// Pipeline parallelism: what the Trainer does for one micro-batch on this
// rank's stage (PipelineWork), and when, which the strategy's schedule
// decides (Strategy::runPipeline: 1F1B in training, forward only in
// evaluation).
#pragma once

#include <cstddef>
#include <string_view>

#include "hpu/core/module/pipeline_module.h"

namespace hpu::core {

class PipelineWork {
 public:
  virtual ~PipelineWork() = default;
  // What micro-batch i's stage receives from the previous stage.
  virtual PipelineModule::StageInput input(std::size_t i) = 0;
  // Runs micro-batch i on this stage (`input` undefined on the first),
  // keeping what its backward needs. Returns the output for the next
  // stage, or on the last stage the loss.
  virtual Tensor forward(std::size_t i, const Tensor& input) = 0;
  // Micro-batch i's backward: from its loss (the last stage; `grad`
  // undefined) or from the gradient of its output. Returns the gradient of
  // its input (undefined on the first stage) and drops what it kept.
  virtual Tensor backward(std::size_t i, const Tensor& grad) = 0;
  // The schedule's phases, for the profiler: "pipeline_forward",
  // "pipeline_backward", and the waits for a neighbour
  // ("pipeline_recv_forward", "pipeline_recv_backward": the bubble) and the
  // sends. Calls nest.
  virtual void start(std::string_view phase) = 0;
  virtual void stop(std::string_view phase) = 0;
};

}  // namespace hpu::core
