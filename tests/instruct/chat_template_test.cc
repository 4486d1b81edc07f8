// Chat templates: the models' real templates over fixed conversations,
// byte for byte equal to what Jinja2 renders in transformers' environment
// (fixtures/chat_renders.json, written by make_chat_fixtures.py), and the
// errors for what the subset refuses or a template raises.
#include "hpu/core/data/chat_template.h"

#include <gtest/gtest.h>

#include <clocale>
#include <ctime>
#include <fstream>
#include <set>

#include "instruct_support.h"

namespace hpu::core::data {
namespace {

using core::testing::errorOf;
using json = nlohmann::ordered_json;

json fixture(const std::string& name) {
  const std::string path = std::string(HPU_SOURCE_DIR) + "/tests/instruct/fixtures/" + name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing " + path + "; run tests/instruct/make_chat_fixtures.py");
  return json::parse(in);
}

// The fixtures' strftime_now time: [year, month, day, hour, minute, second].
std::tm timeOf(const json& now) {
  std::tm t{};
  t.tm_year = now[0].get<int>() - 1900;
  t.tm_mon = now[1].get<int>() - 1;
  t.tm_mday = now[2];
  t.tm_hour = now[3];
  t.tm_min = now[4];
  t.tm_sec = now[5];
  const std::time_t seconds = timegm(&t);  // fills in the weekday and the day of the year
  gmtime_r(&seconds, &t);
  return t;
}

ChatTemplateInputs inputsOf(const json& spec, bool add_generation_prompt, const std::tm& now) {
  ChatTemplateInputs in;
  in.add_generation_prompt = add_generation_prompt;
  in.now = now;
  const auto token = [&](const char* key, std::optional<std::string>& out) {
    if (spec.contains(key)) out = spec[key].get<std::string>();
  };
  token("bos_token", in.bos_token);
  token("eos_token", in.eos_token);
  token("pad_token", in.pad_token);
  token("unk_token", in.unk_token);
  return in;
}

// The message of the DataError `fn` throws ("" and a failure otherwise).

// `source` rendered as template "t" over one user message, within `limits`.
std::string renderOne(const std::string& source, ChatTemplateLimits limits = {}) {
  return ChatTemplate(source, "t", limits).render(json::parse(R"([{"role": "user", "content": "hi"}])"), {});
}

TEST(ChatTemplate, RendersTheModelsTemplatesAsJinja2Does) {
  const json templates = fixture("chat_templates.json");
  const json conversations = fixture("conversations.json");
  const json renders = fixture("chat_renders.json");
  std::map<std::string, ChatTemplate> parsed;
  for (const auto& [name, spec] : templates.items())
    parsed.emplace(name, ChatTemplate(spec["template"].get<std::string>(), name));
  const std::tm now = timeOf(renders["now"]);
  std::set<std::string> refused_somewhere;
  int compared = 0;
  for (const json& r : renders["renders"]) {
    const std::string name = r["template"], conversation = r["conversation"];
    SCOPED_TRACE(name + " / " + conversation + (r["add_generation_prompt"].get<bool>() ? " + generation prompt" : ""));
    const ChatTemplate& t = parsed.at(name);
    const ChatTemplateInputs in = inputsOf(templates[name], r["add_generation_prompt"], now);
    const json& messages = conversations[conversation];
    if (r.contains("text")) {
      EXPECT_EQ(t.render(messages, in), r["text"].get<std::string>());
    } else if (r.contains("refused")) {
      try {
        t.render(messages, in);
        ADD_FAILURE() << "rendered what Jinja2 refuses: " << r["refused"];
      } catch (const ChatTemplateRefusal& e) {
        EXPECT_EQ(e.message(), r["refused"].get<std::string>());
        refused_somewhere.insert(name);
      }
    } else {
      // Jinja2 fails on an undefined value (an empty conversation's messages[0]['role']).
      EXPECT_THROW(t.render(messages, in), DataError) << r["undefined"];
    }
    ++compared;
  }
  EXPECT_EQ(compared, 220);
  EXPECT_EQ(refused_somewhere, (std::set<std::string>{"gemma", "llama2", "mistral"}));
}

TEST(ChatTemplate, EvaluatesRandomExpressionsAsJinja2Does) {
  const json fixture_cases = fixture("random_expressions.json");
  const json messages = fixture("conversations.json")[fixture_cases["conversation"].get<std::string>()];
  int rendered = 0;
  for (const json& c : fixture_cases["cases"]) {
    const std::string source = c["template"];
    SCOPED_TRACE(source);
    if (c.contains("text")) {
      EXPECT_EQ(ChatTemplate(source, "t").render(messages, {}), c["text"].get<std::string>());
      ++rendered;
    } else {
      EXPECT_THROW(ChatTemplate(source, "t").render(messages, {}), DataError) << "Jinja2: " << c["error"];
    }
  }
  EXPECT_GT(rendered, 250);
}

TEST(ChatTemplate, KeepsAndStripsWhitespaceAsJinja2Does) {
  const json fixture_cases = fixture("random_templates.json");
  const json messages = fixture("conversations.json")[fixture_cases["conversation"].get<std::string>()];
  for (const json& c : fixture_cases["cases"]) {
    const std::string source = c["template"];
    SCOPED_TRACE(source);
    EXPECT_EQ(ChatTemplate(source, "t").render(messages, {}), c["text"].get<std::string>());
  }
}

TEST(ChatTemplate, RaiseExceptionNamesTheTemplateAndWhere) {
  const ChatTemplate t(
      "{% if messages[0]['role'] == 'system' %}\n  {{ raise_exception('System role not supported') }}\n{% endif %}",
                       "gemma/tokenizer_config.json: chat_template");
  const json messages = json::parse(R"([{"role": "system", "content": "hi"}])");
  EXPECT_EQ(errorOf<ChatTemplateRefusal>([&] { t.render(messages, {}); }),
            "gemma/tokenizer_config.json: chat_template:2:6: the chat template refuses the conversation: System role "
            "not supported");
}

TEST(ChatTemplate, RefusesWhatTheSubsetLacksWithLineAndColumn) {
  const auto refusal = [](const std::string& source) {
    return errorOf([&] { ChatTemplate(source, "t.jinja"); });
  };
  EXPECT_EQ(refusal("{% macro m() %}x{% endmacro %}"),
            "t.jinja:1:4: the tag 'macro' is not supported; chat templates may use if, elif, else, for, set, break, "
            "continue and generation");
  EXPECT_EQ(refusal("a\n  {{ x | wordwrap }}"),
            "t.jinja:2:10: the filter 'wordwrap' is not supported; chat templates may use abs, capitalize, count, d, "
            "default, first, float, int, items, join, last, length, list, lower, map, rejectattr, replace, reverse, "
            "safe, selectattr, string, title, tojson, trim, upper");
  EXPECT_EQ(refusal("{{ x is sameas y }}"),
            "t.jinja:1:9: the test 'sameas' is not supported; chat templates may use boolean, defined, divisibleby, "
            "eq, equalto, even, false, float, in, integer, iterable, mapping, ne, none, number, odd, sequence, "
            "string, true, undefined");
  EXPECT_EQ(refusal("{{ lipsum(2) }}"),
            "t.jinja:1:4: the function 'lipsum' is not supported; chat templates may call namespace, "
            "raise_exception, range, strftime_now");
  EXPECT_EQ(refusal("{{ m.content.format(1) }}"),
            "t.jinja:1:14: the method 'format' is not supported; chat templates may call capitalize, endswith, get, "
            "items, join, keys, lower, lstrip, replace, rstrip, split, startswith, strip, title, upper, values");
  EXPECT_EQ(refusal("{% set a, b = 1, 2 %}"), "t.jinja:1:9: assigning several variables in one 'set' is not supported");
  EXPECT_EQ(refusal("{% set x %}y{% endset %}"),
            "t.jinja:1:10: block assignments ({% set x %}...{% endset %}) are not supported");
  EXPECT_EQ(refusal("{% for m in messages %}"),
            "t.jinja:1:24: the template ends inside a block; expected '{% endfor %}'");
  EXPECT_EQ(refusal("{% if x %}a{% endfor %}"),
            "t.jinja:1:15: unexpected '{% endfor %}': the open block ends with '{% endif %}'");
  EXPECT_EQ(refusal("{{ 'open }}"), "t.jinja:1:4: this string has no closing quote");
  EXPECT_EQ(refusal("{{ x "), "t.jinja:1:1: this tag has no end ('}}')");
  EXPECT_EQ(refusal("{% endif %}"), "t.jinja:1:4: unexpected '{% endif %}' (no open block it closes)");
  EXPECT_EQ(refusal("{{ (1, 2) }}"), "t.jinja:1:6: tuples are not supported; use a list [a, b]");
  EXPECT_EQ(refusal("{# never closed"), "t.jinja:1:1: this comment has no end ('#}')");
  EXPECT_EQ(refusal("{{ 99999999999999999999 }}"),
            "t.jinja:1:4: the integer 99999999999999999999 does not fit in 64 bits");
  EXPECT_EQ(refusal("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}"),
            "t.jinja:1:203: the template nests blocks or expressions more than 200 deep");
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += "{% if true %}";
  EXPECT_EQ(refusal(deep), "t.jinja:1:2594: the template nests blocks or expressions more than 200 deep");
}

TEST(ChatTemplate, EvaluationErrorsNameTheirPlace) {
  const json messages = json::parse(R"([{"role": "user", "content": "hi"}])");
  const auto error = [&](const std::string& source) {
    return errorOf([&] { ChatTemplate(source, "t").render(messages, {}); });
  };
  EXPECT_EQ(error("{{ 'n=' + 1 }}"), "t:1:9: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(error("\n{{ nothing.role }}"), "t:2:12: 'nothing' is undefined");
  EXPECT_EQ(error("{% set x = 1 %}{% set x.y = 2 %}"),
            "t:1:19: cannot set the attribute 'y' of 'x', a int: only a namespace() has attributes to set");
  EXPECT_EQ(error("{{ 1 // 0 }}"), "t:1:6: integer division or modulo by zero");
  EXPECT_EQ(error("{% for c in 3 %}{% endfor %}"), "t:1:13: 'int' object is not iterable");
  EXPECT_EQ(error("{{ 3 ** 40 }}"), "t:1:6: 3 ** 40 overflows 64-bit integers");
  EXPECT_EQ(ChatTemplate("{{ 1 ** 1000000000000 }} {{ (-1) ** 999999999999 }} {{ 1e999 }} {{ 2 ** 62 }}", "t")
                .render(messages, {}),
            "1 -1 inf 4611686018427387904");
}

TEST(ChatTemplate, IntOfAFloatBeyondSixtyFourBitsIsAnError) {
  const auto error = [](const std::string& source) { return errorOf([&] { renderOne(source); }); };
  // A float truncated toward zero, as Python's int(); an int as it is.
  EXPECT_EQ(renderOne("{{ 2.9|int }} {{ (-2.9)|int }} {{ 9223372036854775807|int }} "
                      "{{ (-9.223372036854775808e18)|int }}"),
            "2 -2 9223372036854775807 -9223372036854775808");
  // NaN: Python's int() refuses it, and Jinja2's filter gives its default.
  EXPECT_EQ(renderOne("{{ (1e999 - 1e999)|int }} {{ (1e999 - 1e999)|int(7) }}"), "0 7");
  EXPECT_EQ(error("{{ 1e300|int }}"),
            "t:1:10: int: 1e+300 is outside the 64-bit integers a chat template computes with");
  EXPECT_EQ(error("{{ 9.3e18|int }}"),
            "t:1:11: int: 9.3e+18 is outside the 64-bit integers a chat template computes with");
  EXPECT_EQ(error("{{ (-1e999)|int }}"),
            "t:1:13: int: -inf is outside the 64-bit integers a chat template computes with");
}

// Found by fuzzing (tests/fuzz/fuzz_chat_template.cc): arithmetic at the
// ends of the 64-bit integers, and templates that loop, grow or nest without
// end, refused by name within ChatTemplateLimits.
TEST(ChatTemplate, OverflowsAndRunawayTemplatesAreRefusedByName) {
  const auto error = [](const std::string& source, ChatTemplateLimits limits) {
    return errorOf([&] { renderOne(source, limits); });
  };
  EXPECT_EQ(error("{{ -(-9223372036854775807 - 1) }}", {}),
            "t:1:4: -(-9223372036854775808) overflows 64-bit integers");
  EXPECT_EQ(error("{{ (-9223372036854775807 - 1)|abs }}", {}),
            "t:1:31: abs(-9223372036854775808) overflows 64-bit integers");
  EXPECT_EQ(error("{{ (-9223372036854775807 - 1) // -1 }}", {}),
            "t:1:31: -9223372036854775808 // -1 overflows 64-bit integers");
  // Past the 64-bit integers a range or a slice ends, as Python's would at its stop.
  EXPECT_EQ(renderOne("{{ range(9223372036854775806, 9223372036854775807, 4611686018427387904) }} "
                      "{{ 'abc'[1::9223372036854775807] }} {{ 'aaa'.replace('a', 'b', -9223372036854775807 - 1) }}"),
            "[9223372036854775806] b bbb");
  EXPECT_EQ(renderOne("{{ [1]|tojson(indent=-2) }}"), "[\n1\n]");  // json.dumps's: no indentation
  const ChatTemplateLimits small{.steps = 1000, .size = 100, .depth = 5};
  EXPECT_EQ(error("{% for i in range(50) %}{% for j in range(50) %}{% endfor %}{% endfor %}", small),
            "t:1:28: the template computes more than 1000 steps (statements, expressions, values visited, 64 bytes "
            "moved); a chat template that computes this much is refused");
  EXPECT_EQ(error("{{ 'x' * 10 * 11 }}", small),
            "t:1:13: the template builds a text or list of more than 100 bytes or items; a chat template that builds "
            "this much is refused");
  EXPECT_EQ(error("{% set ns = namespace(a=1) %}{% for i in range(6) %}{% set ns.a = [ns.a] %}{% endfor %}{{ ns.a }}",
                  small),
            "t:1:56: the template nests values more than 5 deep (a namespace that holds itself?)");
  EXPECT_EQ(error("{% set ns = namespace() %}{% set ns.x = [1, ns] %}", {}),
            "t:1:30: cannot set ns.x to a value that holds ns itself: a namespace that holds itself is not supported");
}

// Python's case mappings from the tables in the source: the same with the
// process's locale "C" (no Unicode case data at all) as anywhere.
TEST(ChatTemplate, MapsCaseAsPythonDoesWhateverTheLocale) {
  const std::string previous = std::setlocale(LC_ALL, nullptr);
  std::setlocale(LC_ALL, "C");
  EXPECT_EQ(renderOne("{{ 'été'|upper }} {{ 'ÉCOLE'|lower }} {{ 'straße'|upper }}"), "ÉTÉ école STRASSE");
  // A capital sigma that ends a word lowers to the final sigma.
  EXPECT_EQ(renderOne("{{ 'ΟΔΟΣ ΣΑΣ'|lower }} {{ 'Σ'|lower }} {{ 'ΑΣ.'.lower() }}"), "οδος σας σ ας.");
  EXPECT_EQ(renderOne("{{ 'Привет, МОСКВА'|upper }} {{ 'Привет, МОСКВА'|lower }}"), "ПРИВЕТ, МОСКВА привет, москва");
  // Turkish dotted and dotless i without a language rule: İ lowers to i + U+0307.
  EXPECT_EQ(renderOne("{{ 'İstanbul'|lower }} {{ 'ılık'|upper }}"), "i\u0307stanbul ILIK");
  // Title case: Python's str.title and capitalize title-case ('ǆ' -> 'ǅ', 'ß' -> 'Ss');
  // Jinja2's title filter upper-cases each word's first character.
  EXPECT_EQ(renderOne("{{ 'ǆemal straße'.title() }} {{ 'ßa ΣΑΣ'|capitalize }} {{ 'ßig-ΟΔΟΣ (ǆ'|title }}"),
            "ǅemal Straße Ssa σας SSig-Οδος (Ǆ");
  std::setlocale(LC_ALL, previous.c_str());
}

TEST(ChatTemplate, KeepsMessageFieldOrderAndUnknownFields) {
  const ChatTemplate t(
      "{% for m in messages %}{{ m | tojson }}{{ m.extra is defined }}{{ m.missing }}{% endfor %}", "t");
  const json messages = json::parse(R"([{"role": "user", "zeta": 1, "content": "x", "extra": [true, null]}])");
  EXPECT_EQ(t.render(messages, {}), R"({"role": "user", "zeta": 1, "content": "x", "extra": [true, null]}True)");
}

}  // namespace
}  // namespace hpu::core::data
