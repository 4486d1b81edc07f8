// Every family hpu-train builds against transformers, both ways: tiny random
// models that transformers makes and saves (make_family_models.py, in the
// release .venv/interop pins) load through AutoModelForCausalLM and give
// transformers' logits, greedy continuation, loss and every parameter's
// gradient; hpu-train's export of each loads back in transformers with the
// same logits and continuation, and a LoRA adapter of each in peft
// (check_hf.py). Outside CI a machine without the venv skips; in CI its
// absence fails.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "hpu/core/models/causal_lm.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu_train_runner.h"
#include "interop_python.h"
#include "test_support.h"

namespace hpu::core {
namespace {

using nlohmann::json;
using testing::TempDir;
using testing::testDevice;

// Runs a script of tests/interop with the venv's interpreter in `dir`.
cli::testing::RunResult runScript(const TempDir& dir, const std::string& script, const std::vector<std::string>& args) {
  return interop::runPythonScript("tests/interop/" + script, args, dir.path(), std::chrono::seconds(600));
}

// Every value within tol * max(1, |want|); reports the largest difference.
void expectClose(const std::vector<float>& got, const json& want, double tol, const std::string& what) {
  const auto ref = want.get<std::vector<double>>();
  ASSERT_EQ(got.size(), ref.size()) << what;
  double worst = 0;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(got[i] - ref[i]);
    worst = std::max(worst, d);
    if (d > tol * std::max(1.0, std::abs(ref[i])) && bad++ == 0) first = i;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " values differ beyond " << tol
                     << "; first at " << first << ": " << got[first] << " vs transformers " << ref[first]
                     << "; largest difference " << worst;
}

std::vector<std::int64_t> flat(const json& rows) {
  std::vector<std::int64_t> out;
  for (const json& r : rows)
    for (const json& v : r) out.push_back(v.get<std::int64_t>());
  return out;
}

std::unique_ptr<models::CausalLM> load(const std::string& init_args) {
  return testing::configuredModel<models::CausalLM>("AutoModelForCausalLM", init_args, 5);
}

// Each test's family made by transformers in a directory of its own (ctest
// runs every test in a process of its own).
class Families : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    HPU_REQUIRE_INTEROP_PYTHON();
    const auto r = runScript(dir_, "make_family_models.py", {dir_.file("hf"), GetParam()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    std::cout << r.out;
  }
  TempDir dir_;
};

TEST_P(Families, TransformersFilesLoadAndComputeAsTransformersDoes) {
  const std::string family = GetParam(), hf = dir_.file("hf/" + family);
  json ref;
  std::ifstream(hf + "/reference.json") >> ref;
  auto model = load("{pretrained: " + hf + "}");
  const std::int64_t batch = static_cast<std::int64_t>(ref["input_ids"].size());
  const std::vector<std::int64_t> ids = flat(ref["input_ids"]);
  const std::int64_t len = static_cast<std::int64_t>(ids.size()) / batch;
  const Tensor input = Tensor::fromHost(testDevice(), {batch, len}, ids);
  {
    model->eval();
    autograd::TapeScope no_grad(nullptr);
    expectClose(model->forward(nn::Inputs{{{"input_ids", input}}}).toHost(), ref["logits"], 1e-5, "logits");
    Generator rng(1);
    EXPECT_EQ(model->generate(ref["prompt"].get<std::vector<std::int64_t>>(), {.max_new_tokens = 8}, rng),
              ref["greedy"].get<std::vector<std::int64_t>>());
  }
  // transformers' loss of labels = input_ids: each position predicts the next.
  std::vector<std::int64_t> labels(ids.size(), -100);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t + 1 < len; ++t) labels[b * len + t] = ids[b * len + t + 1];
  model->train();
  autograd::Tape tape;
  {
    autograd::TapeScope scope(&tape);
    const Tensor loss = model->trainingStep(
        Batch{{"input_ids", input}, {"labels", Tensor::fromHost(testDevice(), {batch, len}, labels)}}, 0);
    EXPECT_NEAR(loss.item(), ref["loss"].get<double>(), 1e-5) << "the loss (Mixtral's with its load-balancing loss)";
    tape.backward(loss);
  }
  std::size_t checked = 0;
  for (const auto& p : model->namedParameters()) {
    SCOPED_TRACE(p.name);
    ASSERT_TRUE(ref["grads"].contains(p.name)) << "transformers has no parameter " << p.name;
    expectClose(p.tensor.grad().toHost(), ref["grads"][p.name], 1e-5, "gradient of " + p.name);
    ++checked;
  }
  EXPECT_EQ(checked, ref["grads"].size()) << "parameters of transformers' model not in ours";
}

TEST_P(Families, ExportsLoadInTransformersAndAdaptersInPeft) {
  const std::string family = GetParam(), hf = dir_.file("hf/" + family);
  json ref;
  std::ifstream(hf + "/reference.json") >> ref;
  TempDir out;
  auto model = load("{pretrained: " + hf + "}");
  model->eval();
  model->exportPretrained(out.file("export"));
  const std::vector<std::int64_t> ids = flat(ref["input_ids"]);
  const auto logitsOf = [&](models::CausalLM& m) {
    autograd::TapeScope no_grad(nullptr);
    return m.forward(nn::Inputs{{{"input_ids", Tensor::fromHost(testDevice(), {2, 12}, ids)}}}).toHost();
  };
  Generator rng(1);
  const std::vector<std::int64_t> prompt = ref["prompt"].get<std::vector<std::int64_t>>();
  json c{{"model_dir", out.file("export")},
         {"input_ids", ref["input_ids"]},
         {"logits", logitsOf(*model)},
         {"prompt", prompt},
         {"greedy", model->generate(prompt, {.max_new_tokens = 8}, rng)}};
  // LoRA on the export (PEFT's default targets; Phi-3 has none), its
  // adapters moved off zero as training would.
  const std::string targets = family == "phi3" ? ", target_modules: [qkv_proj, gate_up_proj]" : "";
  auto adapted = load("{pretrained: " + out.file("export") + ", lora: {r: 4, lora_alpha: 8" + targets + "}}");
  adapted->eval();
  Generator g(17);
  for (const auto& p : adapted->namedParameters())
    if (p.name.find("lora_B") != std::string::npos)
      for (float& v : Tensor(p.tensor).values()) v += 0.1f * g.normal();
  adapted->saveAdapter(out.file("adapter"));
  c["adapter_dir"] = out.file("adapter");
  c["adapter_logits"] = logitsOf(*adapted);
  testing::writeBytes(out.file("case.json"), c.dump());
  const auto r = runScript(out, "check_hf.py", {out.file("case.json")});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::cout << r.out;
}

INSTANTIATE_TEST_SUITE_P(Interop, Families,
                         ::testing::Values("llama", "mistral", "qwen2", "gemma", "gemma2", "phi3", "mixtral"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace hpu::core
