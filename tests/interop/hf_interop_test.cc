// hpu-train's Hugging Face files judged by the real libraries: transformers
// loads an exported Llama and GPT-2 and computes the same logits (1e-5) and
// greedy continuation; peft loads a LoRA adapter onto the export and computes
// the adapted model's logits; AutoTokenizer loads the byte tokenizer's files
// and encodes as ours does. The judges run in .venv/interop
// (scripts/install-deps.sh --interop, which .ci/run calls); outside CI a
// machine without it skips, in CI (CI=true) its absence fails.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "interop_python.h"

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_support.h"
#include "hpu/core/data/tokenizer.h"
#include "hpu/core/models/causal_lm.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu_train_runner.h"

namespace hpu::core {
namespace {

using nlohmann::json;
using testing::TempDir;
using testing::testDevice;


std::unique_ptr<models::CausalLM> build(const std::string& class_name, const std::string& init_args,
                                        std::uint64_t seed) {
  auto model = testing::configuredModel<models::CausalLM>(class_name, init_args, seed);
  model->eval();
  return model;
}

const std::vector<std::int64_t> kIds{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};

std::vector<float> logitsOf(models::CausalLM& m) {
  autograd::TapeScope no_grad(nullptr);
  return m(nn::Inputs{{{"input_ids", Tensor::fromHost(testDevice(), {2, 8}, kIds)}}}).toHost();
}

// The judges' verdict on `c` (written to dir/case.json).
void judge(const TempDir& dir, const json& c) {
  testing::writeBytes(dir.file("case.json"), c.dump());
  const auto r = interop::runPythonScript("tests/interop/check_hf.py", {dir.file("case.json")}, dir.path(),
                                          std::chrono::seconds(300));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::cout << r.out;
}

TEST(HuggingFaceInterop, TransformersAndPeftLoadOurExportsAndComputeTheSame) {
  HPU_REQUIRE_INTEROP_PYTHON();
  const char* tiny_llama =
      "vocab_size: 48, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
      "num_key_value_heads: 2, max_position_embeddings: 64, rope_theta: 500000.0, rms_norm_eps: 1.0e-5";
  const char* tiny_gpt2 = "vocab_size: 48, n_embd: 32, n_layer: 2, n_head: 4, n_positions: 64";
  for (const auto& [family, args] :
       {std::pair{"LlamaForCausalLM", tiny_llama}, std::pair{"GPT2LMHeadModel", tiny_gpt2}}) {
    SCOPED_TRACE(family);
    TempDir dir;
    auto model = build(family, std::string("{") + args + "}", 5);
    model->exportPretrained(dir.file("hf"));
    Generator rng(1);
    const std::vector<std::int64_t> prompt{7, 3, 9, 1};
    json c{{"model_dir", dir.file("hf")},
           {"input_ids", {std::vector<std::int64_t>(kIds.begin(), kIds.begin() + 8),
                          std::vector<std::int64_t>(kIds.begin() + 8, kIds.end())}},
           {"logits", logitsOf(*model)},
           {"prompt", prompt},
           {"greedy", model->generate(prompt, models::GenerationOptions{.max_new_tokens = 12}, rng)}};
    // LoRA on the export, its adapters moved off zero as training would.
    auto adapted = build(family, "{pretrained: " + dir.file("hf") + ", lora: {r: 4, lora_alpha: 8, bias: lora_only}}", 7);
    Generator g(17);
    for (const auto& p : adapted->namedParameters())
      if (p.name.find("lora_B") != std::string::npos || (p.tensor.requiresGrad() && p.name.ends_with("bias")))
        for (float& v : Tensor(p.tensor).values()) v += 0.1f * g.normal();
    adapted->saveAdapter(dir.file("adapter"));
    c["adapter_dir"] = dir.file("adapter");
    c["adapter_logits"] = logitsOf(*adapted);
    // The byte tokenizer's files, as export writes them beside the weights.
    const auto bytes = data::makeByteTokenizer();
    bytes->save(dir.file("hf"));
    const std::vector<std::string> texts{"Hello, world!", "  two  spaces\tand a tab\n", "caf\xc3\xa9 \xe2\x9c\x93",
                                         "1234567890"};
    c["tokenizer_texts"] = texts;
    c["tokenizer_ids"] = json::array();
    for (const auto& t : texts) c["tokenizer_ids"].push_back(bytes->encode(t, "test"));
    judge(dir, c);
  }
}

}  // namespace
}  // namespace hpu::core
