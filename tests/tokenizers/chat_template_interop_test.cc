// Chat templates of real tokenizer directories (Qwen2, Qwen2.5, Gemma,
// Gemma 2: make_fixtures.sh builds them under build/tokenizer-fixtures/)
// rendered by hpu-train's ChatTemplate and by transformers'
// apply_chat_template(tokenize=False) (render_chat_templates.py in
// .venv/interop) over the conversations of tests/instruct/fixtures, with
// and without the generation prompt: the same text, or the same refusal.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "hpu/core/base/file_io.h"
#include "hpu/core/data/chat_template.h"
#include "hpu/core/data/tokenizer.h"
#include "../instruct/instruct_support.h"
#include "hpu_train_runner.h"
#include "interop_python.h"

namespace hpu::core::data {
namespace {

namespace fs = std::filesystem;
using core::testing::errorOf;
using json = nlohmann::ordered_json;

const fs::path kCache = fs::path(HPU_BINARY_DIR) / "tokenizer-fixtures";

TEST(ChatTemplateInterop, RendersAsTransformersApplyChatTemplate) {
  HPU_REQUIRE_INTEROP_PYTHON();
  std::vector<std::string> dirs;
  for (const char* name : {"qwen2", "qwen2_5", "gemma", "gemma2"})
    if (fs::exists(kCache / name / "tokenizer_config.json")) dirs.push_back((kCache / name).string());
  if (dirs.size() < 4) GTEST_SKIP() << "no tokenizer directories in " << kCache << "; run tests/tokenizers/make_fixtures.sh";

  // apply_chat_template refuses an empty conversation before any template
  // sees it, as InstructionDataModule does: left out.
  const json all = json::parse(readFile(std::string(HPU_SOURCE_DIR) + "/tests/instruct/fixtures/conversations.json"));
  json conversations = json::object();
  for (const auto& [name, messages] : all.items())
    if (!messages.empty()) conversations[name] = messages;
  cli::testing::ScratchDir scratch;
  const fs::path job = scratch.path() / "job.json", out = scratch.path() / "renders.json";
  cli::testing::writeFile(job, json{{"dirs", dirs}, {"conversations", conversations}}.dump());
  const auto run = interop::runPythonScript("tests/tokenizers/render_chat_templates.py", {job, out}, scratch.path(),
                                            std::chrono::seconds(600));
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  const json renders = json::parse(readFile(out.string()));

  int texts = 0, refusals = 0, errors = 0;
  for (const std::string& dir : dirs) {
    const auto tokenizer = loadTokenizer(dir);
    const std::string origin = dir + "/tokenizer_config.json: chat_template";
    const ChatTemplate chat(tokenizer->settings().chat_template, origin);
    for (const auto& [name, messages] : conversations.items()) {
      for (const bool generation_prompt : {false, true}) {
        SCOPED_TRACE(dir + " / " + name + (generation_prompt ? " + generation prompt" : ""));
        const json& want = renders[dir][name][generation_prompt ? "true" : "false"];
        const ChatTemplateInputs inputs = chatTemplateInputs(tokenizer->settings(), generation_prompt);
        if (want.contains("text")) {
          EXPECT_EQ(chat.render(messages, inputs), want["text"].get<std::string>());
          ++texts;
        } else if (want.contains("refused")) {
          // The template's own message, in hpu-train's error naming the template and the place.
          const std::string error = errorOf<ChatTemplateRefusal>([&] { chat.render(messages, inputs); });
          EXPECT_TRUE(error.starts_with(origin + ":")) << error;
          EXPECT_TRUE(error.ends_with(": the chat template refuses the conversation: " +
                                      want["refused"].get<std::string>()))
              << error << "\ntransformers: " << want["refused"];
          ++refusals;
        } else {
          EXPECT_THROW(chat.render(messages, inputs), DataError) << "transformers: " << want["error"];
          ++errors;
        }
      }
    }
  }
  // Gemma's templates refuse a system message, in Gemma's words, and so does
  // hpu-train, naming the file and the place.
  const json& refused = renders[dirs[2]]["system"]["false"];
  ASSERT_TRUE(refused.contains("refused")) << refused.dump();
  EXPECT_EQ(refused["refused"], "System role not supported");
  const auto gemma = loadTokenizer(dirs[2]);
  const ChatTemplate gemma_chat(gemma->settings().chat_template, dirs[2] + "/tokenizer_config.json: chat_template");
  EXPECT_EQ(errorOf<ChatTemplateRefusal>(
                [&] { gemma_chat.render(conversations["system"], chatTemplateInputs(gemma->settings(), false)); }),
            dirs[2] + "/tokenizer_config.json: chat_template:1:59: the chat template refuses the conversation: System "
                      "role not supported");
  std::printf("chat templates: %d renders equal, %d refusals equal, %d errors on both sides\n", texts, refusals, errors);
}

}  // namespace
}  // namespace hpu::core::data
