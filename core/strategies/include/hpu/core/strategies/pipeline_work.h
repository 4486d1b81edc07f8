// Pipeline parallelism: what the Trainer does for one micro-batch on this
// rank's stage (PipelineWork), and when, which the strategy's schedule
// decides (Strategy::runPipeline: 1F1B in training, interleaved over the
// stage's model chunks when it has several; forward only in evaluation).
#pragma once

#include <cstddef>
#include <string_view>

#include "hpu/core/module/pipeline_module.h"

namespace hpu::core {

class PipelineWork {
 public:
  virtual ~PipelineWork() = default;
  // The model chunks (virtual stages) this stage holds (PipelineModule::chunks).
  virtual int chunks() const = 0;
  // What each chunk of micro-batch i's stage receives from the previous one.
  virtual PipelineModule::StageInput input(std::size_t i) = 0;
  // Runs micro-batch i through chunk `chunk` of this stage (`input`
  // undefined on the first stage's first chunk), keeping what its backward
  // needs. Returns the output for the next chunk, or on the last stage's
  // last chunk the loss.
  virtual Tensor forward(std::size_t i, int chunk, const Tensor& input) = 0;
  // Its backward: from its loss (the last chunk; `grad` undefined) or from
  // the gradient of its output. Returns the gradient of its input
  // (undefined on the first chunk) and drops what it kept.
  virtual Tensor backward(std::size_t i, int chunk, const Tensor& grad) = 0;
  // The schedule's phases, for the profiler: "pipeline_forward",
  // "pipeline_backward", and the waits for a neighbour
  // ("pipeline_recv_forward", "pipeline_recv_backward": the bubble) and the
  // sends. Calls nest.
  virtual void start(std::string_view phase) = 0;
  virtual void stop(std::string_view phase) = 0;
};

}  // namespace hpu::core
