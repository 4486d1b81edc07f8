// libFuzzer target: a chat template as a downloaded tokenizer_config.json
// brings it, parsed and rendered over a conversation of every role (a
// system prompt, tool calls and their results, non-ASCII text) with and
// without the generation prompt, within lowered ChatTemplateLimits. A
// template outside the subset, one that fails, refuses the conversation or
// goes beyond the limits must come back as a DataError naming its place; any
// other exception or a sanitizer report is a bug.
#include <cstdint>
#include <ctime>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hpu/core/base/errors.h"
#include "hpu/core/data/chat_template.h"

namespace {

using hpu::core::data::ChatTemplateInputs;

const nlohmann::ordered_json& conversation() {
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are terse.\n"},
    {"role": "user", "content": "  Größe von ΟΔΟΣ? İstanbul, ǅ, ﬁ  "},
    {"role": "assistant", "content": "",
     "tool_calls": [{"type": "function", "function": {"name": "size", "arguments": {"of": "ΟΔΟΣ", "n": 3}}}]},
    {"role": "tool", "name": "size", "content": "{\"size\": 2.5e3}"},
    {"role": "assistant", "content": "2500.", "reasoning_content": "check"},
    {"role": "user", "content": "Thanks!"}
  ])");
  return messages;
}

ChatTemplateInputs inputs(bool add_generation_prompt) {
  ChatTemplateInputs in;
  in.add_generation_prompt = add_generation_prompt;
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  std::tm now{};
  now.tm_year = 124;
  now.tm_mon = 6;
  now.tm_mday = 26;
  in.now = now;
  return in;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  try {
    // Limits that keep every input within the fuzzer's time and memory per input.
    const hpu::core::data::ChatTemplate chat(source, "fuzz/tokenizer_config.json: chat_template",
                                             {.steps = 200'000, .size = 1u << 20});
    for (const bool generation_prompt : {false, true}) {
      try {
        chat.render(conversation(), inputs(generation_prompt));
      } catch (const hpu::core::DataError&) {
      }
    }
  } catch (const hpu::core::DataError&) {
  }
  return 0;
}
