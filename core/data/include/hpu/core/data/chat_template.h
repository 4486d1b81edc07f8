// Chat templates: a tokenizer's chat_template (tokenizer_config.json), the
// Jinja2 program that turns a conversation into the model's prompt text,
// rendered as transformers' apply_chat_template renders it (Jinja2 with
// trim_blocks and lstrip_blocks, loop controls, raise_exception, and
// tojson as json.dumps with ensure_ascii=False).
//
// The subset of Jinja2 that chat templates use: text, {{ expr }}, {% if /
// elif / else %}, {% for x in xs [if cond] %} (loop.index0, index, first,
// last, length, revindex, revindex0, previtem, nextitem; {% else %};
// break / continue; tuple targets), {% set x = ... %} and {% set ns.x = ...
// %} (namespace()), comments, whitespace control ({%- -%} {{- -}} {%+).
// Expressions: literals (strings, numbers, true / false / none, lists,
// dicts), and / or / not, == != < > <= >=, in / not in, + - * / // % **, ~,
// x if c else y, indexing, slicing (messages[1:], [::-1]), attributes
// (message.content), the tests, filters, functions and string / dict
// methods that chat_template_syntax.h lists (isSupportedFilter ...).
// Anything else is refused when the template is parsed, with its
// line:column. Strings are Python's: len, slices and indices count
// characters; upper / lower / title / capitalize map case as Python does
// ('ß'.upper() == 'SS', a word-final 'Σ' lowers to 'ς'), from tables pinned
// in the source, whatever the process's locale.
//
// Immutable after construction: render() is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hpu/core/base/errors.h"
#include "hpu/core/data/tokenizer.h"

namespace hpu::core::data {

namespace detail {
struct Node;
}

// The variables a chat template sees besides `messages`.
struct ChatTemplateInputs {
  // Whether to end with the opening of the assistant's turn.
  bool add_generation_prompt = false;
  // The special tokens' text; nullopt leaves the variable undefined, as
  // transformers does for a token the tokenizer does not set.
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  // The local time strftime_now(format) formats (Llama 3.x's "Today Date");
  // nullopt: the current local time, as transformers gives.
  std::optional<std::tm> now;
};

// What one render may compute: a template comes from a downloaded
// tokenizer_config.json and runs in the trainer's process, so one that loops,
// grows or nests without end is refused (DataError naming its place) instead
// of exhausting the process. Real templates use a small part of this.
struct ChatTemplateLimits {
  // Units of work: a statement or expression evaluated, a value visited by a
  // comparison or a conversion to text, an item of a list built or copied,
  // 64 bytes of text moved.
  std::int64_t steps = 10'000'000;
  // Bytes of the rendered text or of any string the template builds; items
  // of any list it builds.
  std::size_t size = 64u << 20;
  // Values nested in values (a namespace may hold itself), as the parser's
  // limit on nested blocks and expressions.
  int depth = 200;
};

// The inputs transformers gives a tokenizer's template: the text of its special
// tokens (those it sets) and add_generation_prompt.
ChatTemplateInputs chatTemplateInputs(const TokenizerSettings& settings, bool add_generation_prompt);

// The template called raise_exception(message): the conversation is not one
// it accepts. what() is "<origin>:<line>:<column>: the chat template refuses
// the conversation: <message>".
class ChatTemplateRefusal : public DataError {
 public:
  ChatTemplateRefusal(const std::string& what, std::string message) : DataError(what), message_(std::move(message)) {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

class ChatTemplate {
 public:
  // Parses `source`. `origin` names it in messages ("model/tokenizer_config.json:
  // chat_template"). Throws DataError "<origin>:<line>:<column>: ..." for a
  // syntax error or a construct outside the subset.
  ChatTemplate(std::string_view source, std::string origin, ChatTemplateLimits limits = {});
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // The text of the conversation `messages` (a JSON array of objects with
  // "role", "content" and whatever else the template reads; key order is
  // kept, as tojson prints it). Also defined: tools and documents (none),
  // and the functions raise_exception, namespace, range and strftime_now.
  // Throws ChatTemplateRefusal for raise_exception, DataError
  // "<origin>:<line>:<column>: ..." for an error of evaluation (an undefined
  // value's attribute, str + int, ...) or a render beyond the limits.
  std::string render(const nlohmann::ordered_json& messages, const ChatTemplateInputs& inputs) const;

  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
  ChatTemplateLimits limits_;
  std::shared_ptr<const std::vector<std::unique_ptr<detail::Node>>> program_;
};

}  // namespace hpu::core::data
