// The activations a training forward keeps for backward, judged by PyTorch:
// per decoder layer, hpu-train's Llama must hold no more device memory after
// its forward than transformers' LlamaForCausalLM (SDPA attention) saves for
// its backward in the same dtype (check_saved_activations.py counts them with
// torch.autograd.graph.saved_tensors_hooks). This is what a training step's
// peak and `estimate`'s memory rest on: a backward function holds the values
// its formula reads and no others (autograd.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "interop_python.h"
#include "test_support.h"
#include "hpu/core/models/causal_lm.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu_train_runner.h"

namespace hpu::core {
namespace {

using nlohmann::json;
using testing::TempDir;

constexpr std::int64_t kHidden = 512, kTokens = 1024;
const json kConfig{{"vocab_size", 1024},         {"hidden_size", kHidden}, {"intermediate_size", 1792},
                   {"num_attention_heads", 8},   {"num_key_value_heads", 2}, {"max_position_embeddings", 4096},
                   {"rms_norm_eps", 1e-5}};

// Device bytes a training forward of `layers` decoder layers leaves in use
// (its output and what its backward functions hold), over the parameters'.
std::uint64_t forwardBytes(int layers, DType dtype) {
  device::Device dev(0, 0, device::Generation::kGaudi2,
                     device::DeviceOptions{{96ull << 30, "gaudi2's 96 GiB of HBM"}, device::ExecutionMode::kLazy,
                                           nullptr, /*shapeOnly=*/true});
  json args = kConfig;
  args["num_hidden_layers"] = layers;
  auto model = testing::buildComponent<LightningModule>(config::ComponentKind::kModel,
                                                        "class_path: LlamaForCausalLM\ninit_args: " + args.dump(),
                                                        "model");
  Generator init(1), dropout(2);
  nn::InitContext ctx{dev, init, dropout, dtype};
  model->configureModel(ctx, {});
  model->train();
  auto& lm = dynamic_cast<models::CausalLM&>(*model);
  const std::uint64_t before = dev.allocator().stats().inUse;
  autograd::Tape tape;
  autograd::TapeScope record(&tape);
  const Tensor logits = lm(nn::Inputs{{{"input_ids", Tensor::zeros(dev, {1, kTokens}, DType::kInt64)}}});
  return dev.allocator().stats().inUse - before;
}

TEST(ActivationMemoryInterop, ADecoderLayerKeepsNoMoreForBackwardThanPyTorchSaves) {
  HPU_REQUIRE_INTEROP_PYTHON();
  TempDir dir;
  testing::writeBytes(dir.file("case.json"),
                      json{{"config", kConfig}, {"tokens", kTokens}, {"dtypes", {"bfloat16", "float32"}}}.dump());
  cli::testing::RunOptions o;
  o.cwd = dir.path();
  o.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", dir.path().string()}, {"OMP_NUM_THREADS", "1"}};
  o.timeout = std::chrono::seconds(300);
  const auto r = cli::testing::runProgram(
      interop::python(),
      {std::string(HPU_SOURCE_DIR) + "/tests/interop/check_saved_activations.py", dir.file("case.json")}, o);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json torch_saved = json::parse(r.out);
  for (const auto& [name, dtype] : {std::pair{"bfloat16", DType::kBFloat16}, std::pair{"float32", DType::kFloat32}}) {
    SCOPED_TRACE(name);
    const double ours = static_cast<double>(forwardBytes(2, dtype) - forwardBytes(1, dtype)) / kTokens / kHidden;
    const double theirs = torch_saved.at(name).get<double>();
    std::cout << name << ": bytes per token per hidden unit kept by a decoder layer: hpu-train " << ours
              << ", PyTorch " << theirs << "\n";
    EXPECT_LE(ours, theirs);
    // What a layer's backward must read: the normalised inputs of the
    // projections, q, k, v, attention's output and the MLP's gate, up and
    // SwiGLU output at least.
    EXPECT_GT(ours, 0.5 * theirs);
  }
}

}  // namespace
}  // namespace hpu::core
