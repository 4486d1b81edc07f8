// What pipeline parallelism needs of a LightningModule: to run as one of
// several stages. configureModel builds this rank's stage
// (InitContext::pipeline_stage of pipeline_stages): a run of the decoder
// layers, the first stage also the embeddings, the last also the output head
// and the loss; with virtual stages (InitContext::virtual_stages), several
// runs, its model chunks: stage s of P holds chunks s, s + P, s + 2P, ... of
// the layers cut into P x chunks runs. Each stage sees every micro-batch
// (the labels too); between chunks travel the hidden states forward and
// their gradients backward.
#pragma once

#include <string_view>
#include <vector>

#include "hpu/core/module/lightning_module.h"

namespace hpu::core {

class PipelineModule {
 public:
  virtual ~PipelineModule() = default;

  // What this stage receives from the previous one for `batch`.
  struct StageInput {
    Shape shape;
    DType dtype = DType::kFloat32;
  };
  virtual StageInput stageInput(const Batch& batch) const = 0;

  // The model chunks this stage holds (1 without virtual stages).
  virtual int chunks() const = 0;

  // Runs this stage's chunk `chunk` on `batch`, recording on the current
  // tape: `input` is the previous chunk's output (undefined on the first
  // stage's first chunk). Returns what the next chunk receives (of the shape
  // and dtype stageInput says), or on the last stage's last chunk the loss,
  // a scalar, which it does not log.
  virtual Tensor forwardStage(const Batch& batch, const Tensor& input, int chunk) = 0;

  // Logs the loss of one micro-batch as trainingStep ("train") or
  // validationStep / testStep ("val", "test") would. Every stage calls it,
  // with the last stage's value, so that every rank logs the same metrics.
  virtual void logLoss(std::string_view split, double loss) = 0;

  // Parameters the first and the last stage both hold (an embedding matrix
  // tied to the output head), on those stages: their gradients are summed
  // over the two, so the copies stay equal.
  virtual std::vector<Tensor> stageSharedParameters() const = 0;
};

}  // namespace hpu::core
