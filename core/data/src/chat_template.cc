// The chat-template evaluator: walks the tree chat_template_parser.cc
// builds, with Python's values and Jinja2's semantics (scopes: a loop
// iteration's `set` stays in that iteration; undefined values print as "",
// are falsy and iterate as empty, and fail when indexed).
#include "hpu/core/data/chat_template.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "case_mapping.h"
#include "chat_template_syntax.h"
#include "hpu/core/base/json_number.h"
#include "tokenizers/utf8.h"

namespace hpu::core::data {
namespace detail {
namespace {

using Kind = Value::Kind;

// ---- text -----------------------------------------------------------------

// The code points of `s` (a byte of an invalid sequence stands for itself;
// messages and templates come from JSON, which nlohmann checks is UTF-8).
std::vector<char32_t> codePoints(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::optional<CodePoint> cp = decodeAt(s, i);
    out.push_back(cp ? cp->value : static_cast<unsigned char>(s[i]));
    i += cp ? cp->length : 1;
  }
  return out;
}

std::string fromCodePoints(const std::vector<char32_t>& cps, std::size_t begin, std::size_t end) {
  std::string out;
  for (std::size_t i = begin; i < end; ++i) appendUtf8(out, cps[i]);
  return out;
}

// Python's str.isspace.
bool isPythonSpace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

// Python's str.strip / lstrip / rstrip: whitespace, or the characters of `chars`.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::vector<char32_t> cps = codePoints(s);
  const std::vector<char32_t> set = chars ? codePoints(*chars) : std::vector<char32_t>{};
  const auto strippable = [&](char32_t cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : isPythonSpace(cp);
  };
  std::size_t b = 0, e = cps.size();
  while (left && b < e && strippable(cps[b])) ++b;
  while (right && e > b && strippable(cps[e - 1])) --e;
  return fromCodePoints(cps, b, e);
}

// `change` (case_mapping.h) of the UTF-8 text `s`.
std::string changeCase(std::string_view s, std::vector<char32_t> (*change)(std::span<const char32_t>)) {
  const std::vector<char32_t> mapped = change(codePoints(s));
  return fromCodePoints(mapped, 0, mapped.size());
}

// Jinja2's title filter: a word (what follows whitespace, '-', '(', '{',
// '[' or '<') has its first character upper-cased and the rest lowered, as
// word[0].upper() + word[1:].lower().
std::string jinjaTitle(std::string_view s) {
  const std::vector<char32_t> cps = codePoints(s);
  const auto separates = [](char32_t c) {
    return isPythonSpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
  };
  std::vector<char32_t> out;
  out.reserve(cps.size());
  for (std::size_t i = 0; i < cps.size();) {
    if (separates(cps[i])) {
      out.push_back(cps[i++]);
      continue;
    }
    std::size_t end = i + 1;
    while (end < cps.size() && !separates(cps[end])) ++end;
    const std::span<const char32_t> word(cps.data() + i, end - i);
    for (const auto& part : {upperCase(word.first(1)), lowerCase(word.subspan(1))})
      out.insert(out.end(), part.begin(), part.end());
    i = end;
  }
  return fromCodePoints(out, 0, out.size());
}

// Python's float repr (shortest round trip, ".0" on integral values).
std::string pythonFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string pythonRepr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == quote || ch == '\\') out += '\\', out += ch;
    else if (ch == '\n') out += "\\n";
    else if (ch == '\r') out += "\\r";
    else if (ch == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
    else out += ch;
  }
  return out + quote;
}

std::string jsonQuote(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += ch;
    }
  }
  return out + "\"";
}

// ---- values ---------------------------------------------------------------

const char* typeName(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return v.tuple ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kFunction: return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return v.boolean;
    case Kind::kInt: return v.integer != 0;
    case Kind::kFloat: return v.real != 0;
    case Kind::kString: return !v.text.empty();
    case Kind::kList: return !v.list->empty();
    case Kind::kDict: return !v.dict->empty();
    case Kind::kNamespace:
    case Kind::kFunction: return true;
  }
  return false;
}

bool isNumber(const Value& v) { return v.is(Kind::kBool) || v.is(Kind::kInt) || v.is(Kind::kFloat); }
bool isInteger(const Value& v) { return v.is(Kind::kBool) || v.is(Kind::kInt); }
std::int64_t asInteger(const Value& v) { return v.is(Kind::kBool) ? (v.boolean ? 1 : 0) : v.integer; }
double asReal(const Value& v) { return v.is(Kind::kFloat) ? v.real : static_cast<double>(asInteger(v)); }

// Python's % of floats: the result has the divisor's sign (a zero too).
double pythonMod(double x, double y) {
  double m = std::fmod(x, y);
  if (m == 0) return std::copysign(0.0, y);
  if ((m < 0) != (y < 0)) m += y;
  return m;
}

Value fromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::of(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::of(j.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<std::uint64_t>();
      return u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                 ? Value::of(static_cast<std::int64_t>(u))
                 : Value::ofReal(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::ofReal(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::of(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList l;
      for (const auto& x : j) l.push_back(fromJson(x));
      return Value::of(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      ValueDict d;
      for (const auto& [k, x] : j.items()) d.emplace_back(k, fromJson(x));
      return Value::of(std::move(d));
    }
    default: return Value::none();
  }
}

// ---- evaluation -----------------------------------------------------------

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const std::string& origin, Value globals, std::optional<std::tm> now, const ChatTemplateLimits& limits)
      : origin_(origin), now_(now), limits_(limits) {
    scopes_.emplace_back();
    for (auto& [k, v] : *globals.dict) scopes_.back()[k] = v;
  }

  std::string run(const NodeList& program) {
    exec(program);
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(SourcePos p, const std::string& message) const {
    throw DataError(fmt::format("{}:{}:{}: {}", origin_, p.line, p.column, message));
  }
  // An undefined value used where a value is needed.
  [[noreturn]] void failUndefined(SourcePos p, const Value& v) const { fail(p, v.text); }

  // ---- the limits of one render (ChatTemplateLimits) ----
  // `units` of work more, at at_.
  void spend(std::int64_t units) {
    steps_ += units;
    if (steps_ > limits_.steps)
      fail(at_, fmt::format("the template computes more than {} steps (statements, expressions, values visited, 64 "
                            "bytes moved); a chat template that computes this much is refused",
                            limits_.steps));
  }
  // A text or list of `n` bytes or items built at at_.
  void fits(std::size_t n) const {
    if (n > limits_.size)
      fail(at_, fmt::format("the template builds a text or list of more than {} bytes or items; a chat template that "
                            "builds this much is refused",
                            limits_.size));
  }
  // A value visited `depth` values deep, at at_.
  void nests(int depth) const {
    if (depth > limits_.depth)
      fail(at_, fmt::format("the template nests values more than {} deep (a namespace that holds itself?)",
                            limits_.depth));
  }
  // The items and the bytes of text `v` holds itself (a list's items' own
  // text too): what building, moving or copying it takes.
  struct Extent {
    std::size_t items = 0, bytes = 0;
    std::size_t size() const { return items + bytes; }
    std::int64_t steps() const { return static_cast<std::int64_t>(items + bytes / 64); }
  };
  static Extent extentOf(const Value& v) {
    Extent e{0, v.text.size()};
    if (v.list)
      for (const Value& x : *v.list) e.items += 1, e.bytes += x.text.size();
    if (v.dict)
      for (const auto& [k, x] : *v.dict) e.items += 1, e.bytes += k.size() + x.text.size();
    return e;
  }

  // Whether `v`, `depth` values deep, holds the namespace whose attributes
  // are `target` (`seen`: the lists and dicts visited).
  bool holds(const Value& v, const ValueDict* target, int depth, std::unordered_set<const void*>& seen) {
    spend(1);
    nests(depth);
    if (v.dict.get() == target) return true;
    const void* node = v.list ? static_cast<const void*>(v.list.get()) : static_cast<const void*>(v.dict.get());
    if (node == nullptr || !seen.insert(node).second) return false;
    if (v.list)
      for (const Value& x : *v.list)
        if (holds(x, target, depth + 1, seen)) return true;
    if (v.dict)
      for (const auto& [k, x] : *v.dict)
        if (holds(x, target, depth + 1, seen)) return true;
    return false;
  }

  // Python's str(), within the limits.
  std::string str(const Value& v, int depth = 0) {
    spend(1);
    nests(depth);
    switch (v.kind) {
      case Kind::kUndefined: return "";
      case Kind::kNone: return "None";
      case Kind::kBool: return v.boolean ? "True" : "False";
      case Kind::kInt: return std::to_string(v.integer);
      case Kind::kFloat: return pythonFloat(v.real);
      case Kind::kString: return v.text;
      case Kind::kList: {
        std::string out = v.tuple ? "(" : "[";
        for (std::size_t i = 0; i < v.list->size(); ++i) {
          out += (i ? ", " : "") + repr((*v.list)[i], depth + 1);
          fits(out.size());
        }
        if (v.tuple && v.list->size() == 1) out += ",";
        return out + (v.tuple ? ")" : "]");
      }
      case Kind::kDict:
      case Kind::kNamespace: {
        std::string out = v.is(Kind::kNamespace) ? "<Namespace {" : "{";
        bool first = true;
        for (const auto& [k, x] : *v.dict) {
          out += (first ? "" : ", ") + pythonRepr(k) + ": " + repr(x, depth + 1);
          fits(out.size());
          first = false;
        }
        return out + (v.is(Kind::kNamespace) ? "}>" : "}");
      }
      case Kind::kFunction: return "<function " + v.text + ">";
    }
    return "";
  }

  std::string repr(const Value& v, int depth = 0) {
    if (v.is(Kind::kUndefined)) return "Undefined";  // inside a list or dict: Jinja2's Undefined's repr
    return v.is(Kind::kString) ? pythonRepr(v.text) : str(v, depth);
  }

  // Python's ==, within the limits. A list or dict equals itself (Python's
  // identity shortcut: [nan] shared is equal to itself).
  bool equals(const Value& a, const Value& b, int depth = 0) {
    spend(1);
    nests(depth);
    if (isNumber(a) && isNumber(b))
      return isInteger(a) && isInteger(b) ? asInteger(a) == asInteger(b) : asReal(a) == asReal(b);
    if (a.kind != b.kind) return false;
    switch (a.kind) {
      case Kind::kUndefined:
      case Kind::kNone: return true;
      case Kind::kString: return a.text == b.text;
      case Kind::kList:
        return a.list == b.list ||
               (a.list->size() == b.list->size() &&
                std::equal(a.list->begin(), a.list->end(), b.list->begin(),
                           [&](const Value& x, const Value& y) { return equals(x, y, depth + 1); }));
      case Kind::kDict:
        if (a.dict == b.dict) return true;
        if (a.dict->size() != b.dict->size()) return false;
        for (const auto& [k, v] : *a.dict) {
          const Value* other = b.find(k);
          if (!other || !equals(v, *other, depth + 1)) return false;
        }
        return true;
      case Kind::kNamespace: return a.dict == b.dict;
      case Kind::kFunction: return a.text == b.text;
      default: return false;
    }
  }

  Flow exec(const NodeList& nodes) {
    for (const auto& n : nodes) {
      const Flow f = exec(*n);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow exec(const Node& n) {
    const SourcePos outer = at_;
    at_ = n.pos;
    spend(1);
    const Flow f = execNode(n);
    at_ = outer;
    return f;
  }

  // Appends `text` to the rendered text.
  void output(const std::string& text) {
    spend(static_cast<std::int64_t>(text.size() / 64));
    out_ += text;
    fits(out_.size());
  }

  Flow execNode(const Node& n) {
    switch (n.kind) {
      case Node::Kind::kText: output(n.text); return Flow::kNormal;
      case Node::Kind::kOutput: output(str(eval(*n.expr))); return Flow::kNormal;
      case Node::Kind::kIf:
        for (const auto& [condition, body] : n.branches)
          if (!condition || truthy(eval(*condition))) return exec(body);
        return Flow::kNormal;
      case Node::Kind::kFor: return execFor(n);
      case Node::Kind::kSet: {
        Value v = eval(*n.expr);
        if (n.attribute.empty()) {
          scopes_.back()[n.targets[0]] = std::move(v);
          return Flow::kNormal;
        }
        const Value target = lookup(n.targets[0]);
        if (!target.is(Kind::kNamespace))
          fail(n.pos, fmt::format("cannot set the attribute '{}' of '{}', a {}: only a namespace() has attributes to "
                                  "set",
                                  n.attribute, n.targets[0], typeName(target)));
        std::unordered_set<const void*> seen;
        if (holds(v, target.dict.get(), 0, seen))
          fail(n.pos, fmt::format("cannot set {}.{} to a value that holds {} itself: a namespace that holds itself "
                                  "is not supported",
                                  n.targets[0], n.attribute, n.targets[0]));
        for (auto& [k, x] : *target.dict)
          if (k == n.attribute) {
            x = std::move(v);
            return Flow::kNormal;
          }
        target.dict->emplace_back(n.attribute, std::move(v));
        return Flow::kNormal;
      }
      case Node::Kind::kBreak: return Flow::kBreak;
      case Node::Kind::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  // The items a for loop (or a filter) walks: a list's items, a dict's keys,
  // a string's characters; nothing for undefined.
  ValueList iterate(const Value& v, SourcePos p) {
    spend(extentOf(v).steps());
    switch (v.kind) {
      case Kind::kUndefined: return {};
      case Kind::kList: return *v.list;
      case Kind::kDict: {
        ValueList keys;
        for (const auto& [k, x] : *v.dict) keys.push_back(Value::of(k));
        return keys;
      }
      case Kind::kString: {
        const std::vector<char32_t> cps = codePoints(v.text);
        ValueList chars;
        for (std::size_t i = 0; i < cps.size(); ++i) chars.push_back(Value::of(fromCodePoints(cps, i, i + 1)));
        return chars;
      }
      default: fail(p, fmt::format("'{}' object is not iterable", typeName(v)));
    }
  }

  void bindTargets(const Node& n, const Value& item) {
    auto& scope = scopes_.back();
    if (n.targets.size() == 1) {
      scope[n.targets[0]] = item;
      return;
    }
    const ValueList parts = iterate(item, n.pos);
    if (parts.size() != n.targets.size())
      fail(n.pos, fmt::format("cannot unpack {} values into {} loop variables", parts.size(), n.targets.size()));
    for (std::size_t k = 0; k < parts.size(); ++k) scope[n.targets[k]] = parts[k];
  }

  Flow execFor(const Node& n) {
    ValueList items = iterate(eval(*n.expr), n.expr->pos);
    if (n.filter) {
      ValueList kept;
      for (const Value& item : items) {
        scopes_.emplace_back();
        bindTargets(n, item);
        if (truthy(eval(*n.filter))) kept.push_back(item);
        scopes_.pop_back();
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(n.else_body);
    const auto length = static_cast<std::int64_t>(items.size());
    for (std::int64_t i = 0; i < length; ++i) {
      spend(1 + 3 * extentOf(items[static_cast<std::size_t>(i)]).steps());  // the item, previtem and nextitem
      scopes_.emplace_back();
      bindTargets(n, items[static_cast<std::size_t>(i)]);
      scopes_.back()["loop"] = Value::of(ValueDict{
          {"index0", Value::of(i)},
          {"index", Value::of(i + 1)},
          {"first", Value::of(i == 0)},
          {"last", Value::of(i == length - 1)},
          {"length", Value::of(length)},
          {"revindex", Value::of(length - i)},
          {"revindex0", Value::of(length - i - 1)},
          {"previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value::undefined("there is no previous item")},
          {"nextitem",
           i + 1 < length ? items[static_cast<std::size_t>(i + 1)] : Value::undefined("there is no next item")},
      });
      const Flow f = exec(n.body);
      scopes_.pop_back();
      if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  Value lookup(const std::string& name) const {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
      const auto it = s->find(name);
      if (it != s->end()) return it->second;
    }
    return Value::undefined(fmt::format("'{}' is undefined", name));
  }

  // Jinja2's getattr: a dict's key or a namespace's attribute; undefined otherwise.
  Value attribute(const Value& v, const std::string& name, SourcePos p) const {
    if (v.is(Kind::kUndefined)) failUndefined(p, v);
    if (v.is(Kind::kDict) || v.is(Kind::kNamespace)) {
      if (const Value* x = v.find(name)) return *x;
    }
    return Value::undefined(fmt::format("'{}' has no attribute '{}'", typeName(v), name));
  }

  // Python's slice indices of a sequence of `n`.
  std::vector<std::size_t> sliceIndices(std::int64_t n, const Expr& e) {
    std::optional<std::int64_t> part[3];
    for (int k = 0; k < 3; ++k) {
      if (!e.operands[static_cast<std::size_t>(k) + 1]) continue;
      const Value v = eval(*e.operands[static_cast<std::size_t>(k) + 1]);
      if (v.is(Kind::kNone)) continue;
      if (!isInteger(v)) fail(e.pos, fmt::format("slice indices must be integers or none, not {}", typeName(v)));
      part[k] = asInteger(v);
    }
    const std::int64_t step = part[2].value_or(1);
    if (step == 0) fail(e.pos, "slice step cannot be zero");
    const auto clamp = [&](std::optional<std::int64_t> x, std::int64_t fallback) {
      if (!x) return fallback;
      std::int64_t i = *x < 0 ? *x + n : *x;
      if (step > 0) return std::clamp<std::int64_t>(i, 0, n);
      return std::clamp<std::int64_t>(i, -1, n - 1);
    };
    const std::int64_t start = clamp(part[0], step > 0 ? 0 : n - 1), stop = clamp(part[1], step > 0 ? n : -1);
    std::vector<std::size_t> out;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop;) {
      out.push_back(static_cast<std::size_t>(i));
      if (__builtin_add_overflow(i, step, &i)) break;
    }
    return out;
  }

  Value item(const Value& v, const Value& key, SourcePos p) {
    switch (v.kind) {
      case Kind::kUndefined: failUndefined(p, v);
      case Kind::kList:
      case Kind::kString:
        if (isInteger(key)) {
          const std::vector<char32_t> cps = v.is(Kind::kString) ? codePoints(v.text) : std::vector<char32_t>{};
          const auto n = static_cast<std::int64_t>(v.is(Kind::kString) ? cps.size() : v.list->size());
          std::int64_t i = asInteger(key);
          if (i < 0) i += n;
          if (i < 0 || i >= n)
            return Value::undefined(fmt::format("{} index {} out of range ({} items)", typeName(v), asInteger(key), n));
          const auto u = static_cast<std::size_t>(i);
          return v.is(Kind::kString) ? Value::of(fromCodePoints(cps, u, u + 1)) : (*v.list)[u];
        }
        break;
      case Kind::kDict:
      case Kind::kNamespace:
        if (key.is(Kind::kString)) return attribute(v, key.text, p);
        break;
      default: break;
    }
    return Value::undefined(fmt::format("'{}' has no item {}", typeName(v), repr(key)));
  }

  // Evaluates keyword `name` of a call, or returns nullopt.
  std::optional<Value> keyword(const Expr& e, std::string_view name) {
    for (const auto& [k, x] : e.keywords)
      if (k == name) return eval(*x);
    return std::nullopt;
  }
  // Argument `index` (after the operand) of a filter, test or method, by
  // position or by keyword `name`.
  std::optional<Value> argument(const Expr& e, std::size_t index, std::string_view name) {
    if (index < e.operands.size()) return eval(*e.operands[index]);
    return keyword(e, name);
  }
  void expectArguments(const Expr& e, std::size_t most, std::initializer_list<std::string_view> keywords) {
    if (e.operands.size() > most)
      fail(e.pos, fmt::format("'{}' takes at most {} argument{}", e.name, most - 1, most == 2 ? "" : "s"));
    for (const auto& [k, x] : e.keywords)
      if (std::find(keywords.begin(), keywords.end(), k) == keywords.end())
        fail(x->pos, fmt::format("'{}' has no argument '{}'", e.name, k));
  }
  std::string stringArgument(const Expr& e, const Value& v, const char* what) {
    if (!v.is(Kind::kString)) fail(e.pos, fmt::format("'{}' needs a string {}, got {}", e.name, what, typeName(v)));
    return v.text;
  }
  std::optional<std::string> charsArgument(const Expr& e, std::size_t index) {
    const std::optional<Value> v = argument(e, index, "chars");
    if (!v || v->is(Kind::kNone)) return std::nullopt;
    return stringArgument(e, *v, "of characters");
  }

  Value eval(const Expr& e) {
    const SourcePos outer = at_;
    at_ = e.pos;
    spend(1);
    Value v = evalExpr(e);
    // A value's string is copied with it; its list or dict is shared (building one is charged where it is built).
    spend(static_cast<std::int64_t>(v.text.size() / 64));
    fits(std::max(v.text.size(), v.list ? v.list->size() : 0));
    at_ = outer;
    return v;
  }

  Value evalExpr(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: return lookup(e.name);
      case Expr::Kind::kList: {
        ValueList l;
        for (const auto& x : e.operands) l.push_back(eval(*x));
        return Value::of(std::move(l));
      }
      case Expr::Kind::kDict: {
        ValueDict d;
        for (std::size_t i = 0; i < e.operands.size(); i += 2) {
          const Value key = eval(*e.operands[i]);
          if (!key.is(Kind::kString)) fail(e.operands[i]->pos, "dict keys must be strings");
          Value v = eval(*e.operands[i + 1]);
          const auto it = std::find_if(d.begin(), d.end(), [&](const auto& kv) { return kv.first == key.text; });
          if (it != d.end()) it->second = std::move(v);
          else d.emplace_back(key.text, std::move(v));
        }
        return Value::of(std::move(d));
      }
      case Expr::Kind::kAttribute: return attribute(eval(*e.operands[0]), e.name, e.pos);
      case Expr::Kind::kItem: return item(eval(*e.operands[0]), eval(*e.operands[1]), e.pos);
      case Expr::Kind::kSlice: {
        const Value v = eval(*e.operands[0]);
        if (v.is(Kind::kUndefined)) failUndefined(e.pos, v);
        if (v.is(Kind::kString)) {
          const std::vector<char32_t> cps = codePoints(v.text);
          std::string out;
          for (const std::size_t i : sliceIndices(static_cast<std::int64_t>(cps.size()), e))
            out += fromCodePoints(cps, i, i + 1);
          return Value::of(std::move(out));
        }
        if (!v.is(Kind::kList)) fail(e.pos, fmt::format("a {} cannot be sliced", typeName(v)));
        ValueList out;
        for (const std::size_t i : sliceIndices(static_cast<std::int64_t>(v.list->size()), e))
          out.push_back((*v.list)[i]);
        return Value::of(std::move(out), v.tuple);
      }
      case Expr::Kind::kCall: return call(e);
      case Expr::Kind::kMethod: return method(e);
      case Expr::Kind::kFilter: return filter(e);
      case Expr::Kind::kTest: {
        const bool result = test(e, eval(*e.operands[0]));
        return Value::of(e.negated ? !result : result);
      }
      case Expr::Kind::kUnary: {
        const Value v = eval(*e.operands[0]);
        if (e.name == "not") return Value::of(!truthy(v));
        if (v.is(Kind::kUndefined)) failUndefined(e.pos, v);
        if (!isNumber(v)) fail(e.pos, fmt::format("bad operand type for unary {}: '{}'", e.name, typeName(v)));
        if (e.name == "+") return isInteger(v) ? Value::of(asInteger(v)) : v;
        if (!isInteger(v)) return Value::ofReal(-v.real);
        if (asInteger(v) == std::numeric_limits<std::int64_t>::min())
          fail(e.pos, fmt::format("-({}) overflows 64-bit integers", asInteger(v)));
        return Value::of(-asInteger(v));
      }
      case Expr::Kind::kBinary: return binary(e);
      case Expr::Kind::kCondition:
        if (truthy(eval(*e.operands[1]))) return eval(*e.operands[0]);
        return e.operands[2] ? eval(*e.operands[2]) : Value::undefined("the condition is false and there is no else");
    }
    return Value::undefined("?");
  }

  bool contains(const Value& container, const Value& x, SourcePos p) {
    switch (container.kind) {
      case Kind::kUndefined: return false;
      case Kind::kString:
        if (!x.is(Kind::kString))
          fail(p, fmt::format("'in <string>' requires a string as left operand, not {}", typeName(x)));
        return container.text.find(x.text) != std::string::npos;
      case Kind::kList:
        return std::any_of(container.list->begin(), container.list->end(),
                           [&](const Value& v) { return equals(v, x); });
      case Kind::kDict:
      case Kind::kNamespace: return x.is(Kind::kString) && container.find(x.text) != nullptr;
      default: fail(p, fmt::format("argument of type '{}' is not iterable", typeName(container)));
    }
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    const Value a = eval(*e.operands[0]);
    if (op == "and") return truthy(a) ? eval(*e.operands[1]) : a;
    if (op == "or") return truthy(a) ? a : eval(*e.operands[1]);
    const Value b = eval(*e.operands[1]);
    if (op == "==") return Value::of(equals(a, b));
    if (op == "!=") return Value::of(!equals(a, b));
    if (op == "in") return Value::of(contains(b, a, e.pos));
    if (op == "not in") return Value::of(!contains(b, a, e.pos));
    if (op == "~") return Value::of(str(a) + str(b));
    if (a.is(Kind::kUndefined)) failUndefined(e.pos, a);
    if (b.is(Kind::kUndefined)) failUndefined(e.pos, b);
    const auto unsupported = [&]() -> Value {
      if (op == "+" && a.is(Kind::kString))
        fail(e.pos, fmt::format("can only concatenate str (not \"{}\") to str", typeName(b)));
      fail(e.pos, fmt::format("unsupported operand types for {}: '{}' and '{}'", op, typeName(a), typeName(b)));
    };
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int order;
      if (isNumber(a) && isNumber(b)) order = asReal(a) < asReal(b) ? -1 : asReal(a) > asReal(b) ? 1 : 0;
      else if (a.is(Kind::kString) && b.is(Kind::kString)) order = a.text.compare(b.text);
      else fail(e.pos, fmt::format("'{}' is not supported between '{}' and '{}'", op, typeName(a), typeName(b)));
      return Value::of(op == "<" ? order < 0 : op == ">" ? order > 0 : op == "<=" ? order <= 0 : order >= 0);
    }
    if (op == "+" && a.is(Kind::kString) && b.is(Kind::kString)) return Value::of(a.text + b.text);
    if (op == "+" && a.is(Kind::kList) && b.is(Kind::kList)) {
      ValueList l = *a.list;
      l.insert(l.end(), b.list->begin(), b.list->end());
      return Value::of(std::move(l));
    }
    const auto sequence = [](const Value& v) { return v.is(Kind::kString) || v.is(Kind::kList); };
    if (op == "*" && ((sequence(a) && isInteger(b)) || (isInteger(a) && sequence(b)))) {
      // Repetition, either way round, at most 100000 times.
      const Value& seq = sequence(a) ? a : b;
      const std::int64_t times = std::min<std::int64_t>(asInteger(sequence(a) ? b : a), 100000);
      const Extent extent = extentOf(seq);
      std::size_t size = 0;
      if (times > 0 && __builtin_mul_overflow(extent.size(), static_cast<std::size_t>(times), &size))
        size = SIZE_MAX;
      fits(size);
      spend(extent.steps() * std::max<std::int64_t>(times, 0));
      Value out = seq.is(Kind::kString) ? Value::of(std::string()) : Value::of(ValueList{});
      for (std::int64_t k = 0; k < times; ++k) {
        if (seq.is(Kind::kString)) out.text += seq.text;
        else out.list->insert(out.list->end(), seq.list->begin(), seq.list->end());
      }
      return out;
    }
    if (!isNumber(a) || !isNumber(b)) return unsupported();
    if (isInteger(a) && isInteger(b) && op != "/") {
      const std::int64_t x = asInteger(a), y = asInteger(b);
      std::int64_t r = 0;
      bool overflow = false;
      if (op == "+") overflow = __builtin_add_overflow(x, y, &r);
      else if (op == "-") overflow = __builtin_sub_overflow(x, y, &r);
      else if (op == "*") overflow = __builtin_mul_overflow(x, y, &r);
      else if (op == "//" || op == "%") {
        if (y == 0) fail(e.pos, "integer division or modulo by zero");
        if (x == std::numeric_limits<std::int64_t>::min() && y == -1)
          fail(e.pos, fmt::format("{} {} {} overflows 64-bit integers", x, op, y));
        std::int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;
        r = op == "//" ? q : m;
      } else if (op == "**") {
        if (y < 0) return Value::ofReal(std::pow(static_cast<double>(x), static_cast<double>(y)));
        // By squaring: y may be large when x is 0, 1 or -1.
        r = 1;
        std::int64_t base = x;
        for (std::int64_t k = y; k > 0 && !overflow; k >>= 1) {
          if (k & 1) overflow = __builtin_mul_overflow(r, base, &r);
          if (k > 1 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
        }
      }
      if (overflow) fail(e.pos, fmt::format("{} {} {} overflows 64-bit integers", x, op, y));
      return Value::of(r);
    }
    const double x = asReal(a), y = asReal(b);
    if (op == "+") return Value::ofReal(x + y);
    if (op == "-") return Value::ofReal(x - y);
    if (op == "*") return Value::ofReal(x * y);
    if (op == "**") return Value::ofReal(std::pow(x, y));
    if (y == 0) fail(e.pos, "division by zero");
    if (op == "/") return Value::ofReal(x / y);
    if (op == "//") return Value::ofReal(std::floor(x / y));
    if (op == "%") return Value::ofReal(pythonMod(x, y));
    return unsupported();
  }

  Value call(const Expr& e) {
    if (e.name == "raise_exception") {
      const std::string message = e.operands.empty() ? "" : str(eval(*e.operands[0]));
      throw ChatTemplateRefusal(fmt::format("{}:{}:{}: the chat template refuses the conversation: {}", origin_,
                                            e.pos.line, e.pos.column, message),
                                message);
    }
    if (e.name == "namespace") {
      ValueDict d;
      for (const auto& x : e.operands) {
        const Value v = eval(*x);
        if (!v.is(Kind::kDict)) fail(x->pos, "namespace() takes a dict or name=value arguments");
        d.insert(d.end(), v.dict->begin(), v.dict->end());
      }
      for (const auto& [k, x] : e.keywords) d.emplace_back(k, eval(*x));
      return Value::of(std::move(d), Kind::kNamespace);
    }
    if (e.name == "strftime_now") {
      // transformers' strftime_now(format): datetime.now().strftime(format).
      if (e.operands.size() != 1) fail(e.pos, "strftime_now() takes one format string");
      const Value format = eval(*e.operands[0]);
      if (!format.is(Kind::kString)) fail(e.pos, "strftime_now() takes a format string");
      std::tm now{};
      if (now_) {
        now = *now_;
      } else {
        const std::time_t t = std::time(nullptr);
        localtime_r(&t, &now);
      }
      std::string out(64 + format.text.size() * 4, '\0');
      out.resize(std::strftime(out.data(), out.size(), format.text.c_str(), &now));
      return Value::of(std::move(out));
    }
    // range([start,] stop[, step]), at most 100000 numbers (Jinja2's sandbox limit).
    std::vector<std::int64_t> args;
    for (const auto& x : e.operands) {
      const Value v = eval(*x);
      if (!isInteger(v)) fail(x->pos, fmt::format("range() takes integers, not {}", typeName(v)));
      args.push_back(asInteger(v));
    }
    if (args.empty() || args.size() > 3) fail(e.pos, "range() takes 1 to 3 integers");
    const std::int64_t start = args.size() > 1 ? args[0] : 0, stop = args.size() > 1 ? args[1] : args[0],
                       step = args.size() > 2 ? args[2] : 1;
    if (step == 0) fail(e.pos, "range() step cannot be zero");
    ValueList l;
    // Past the 64-bit integers the next number would be past `stop` too.
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop;) {
      if (l.size() >= 100000) fail(e.pos, "range() is limited to 100000 numbers");
      spend(1);
      l.push_back(Value::of(i));
      if (__builtin_add_overflow(i, step, &i)) break;
    }
    return Value::of(std::move(l));
  }

  // Jinja2's int filter of a number: an int as it is, a float truncated
  // toward zero; NaN gives `fallback` (Python's int() refuses it, and the
  // filter falls back). A float outside the 64-bit integers the template
  // computes with (inf, 1e300; Python's are unbounded) is an error.
  Value toInteger(const Value& v, const Value& fallback, SourcePos p) const {
    if (isInteger(v)) return Value::of(asInteger(v));
    if (std::isnan(v.real)) return fallback;
    const std::optional<std::int64_t> i = truncatedInteger<std::int64_t>(v.real);
    if (!i)
      fail(p, fmt::format("int: {} is outside the 64-bit integers a chat template computes with", pythonFloat(v.real)));
    return Value::of(*i);
  }

  ValueList dictItems(const Value& v) const {
    ValueList l;
    for (const auto& [k, x] : *v.dict) l.push_back(Value::of(ValueList{Value::of(k), x}, true));
    return l;
  }

  Value method(const Expr& e) {
    const Value self = eval(*e.operands[0]);
    const std::string& m = e.name;
    if (self.is(Kind::kUndefined)) failUndefined(e.pos, self);
    if (self.is(Kind::kDict)) {
      if (m == "items" || m == "keys" || m == "values") {
        expectArguments(e, 1, {});
        ValueList l;
        for (const auto& [k, x] : *self.dict)
          l.push_back(m == "keys" ? Value::of(k) : m == "values" ? x : Value::of(ValueList{Value::of(k), x}, true));
        return Value::of(std::move(l));
      }
      if (m == "get") {
        expectArguments(e, 3, {});
        if (e.operands.size() < 2) fail(e.pos, "get() needs a key");
        const Value key = eval(*e.operands[1]);
        const Value* x = key.is(Kind::kString) ? self.find(key.text) : nullptr;
        return x ? *x : e.operands.size() > 2 ? eval(*e.operands[2]) : Value::none();
      }
    }
    if (self.is(Kind::kString)) {
      const std::string& s = self.text;
      if (m == "strip" || m == "lstrip" || m == "rstrip") {
        expectArguments(e, 2, {});
        return Value::of(strip(s, charsArgument(e, 1), m != "rstrip", m != "lstrip"));
      }
      if (m == "upper" || m == "lower") {
        expectArguments(e, 1, {});
        return Value::of(changeCase(s, m == "upper" ? upperCase : lowerCase));
      }
      if (m == "title") return Value::of(changeCase(s, titleCase));
      if (m == "capitalize") return Value::of(changeCase(s, capitalized));
      if (m == "startswith" || m == "endswith") {
        expectArguments(e, 2, {});
        if (e.operands.size() < 2) fail(e.pos, fmt::format("{}() needs a string", m));
        const Value arg = eval(*e.operands[1]);
        const ValueList options = arg.is(Kind::kList) ? *arg.list : ValueList{arg};
        for (const Value& o : options) {
          const std::string x = stringArgument(e, o, "or list of strings");
          const bool starts = s.rfind(x, 0) == 0;
          const bool ends = s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
          if (m == "startswith" ? starts : ends) return Value::of(true);
        }
        return Value::of(false);
      }
      if (m == "split") {
        expectArguments(e, 3, {"sep", "maxsplit"});
        const std::optional<Value> sep = argument(e, 1, "sep");
        const std::optional<Value> limit = argument(e, 2, "maxsplit");
        std::int64_t maxsplit = limit && isInteger(*limit) ? asInteger(*limit) : -1;
        ValueList parts;
        if (!sep || sep->is(Kind::kNone)) {
          const std::vector<char32_t> cps = codePoints(s);
          std::size_t i = 0;
          while (true) {
            while (i < cps.size() && isPythonSpace(cps[i])) ++i;
            if (i == cps.size()) break;
            if (maxsplit == 0) {
              std::size_t end = cps.size();
              while (end > i && isPythonSpace(cps[end - 1])) --end;
              parts.push_back(Value::of(fromCodePoints(cps, i, end)));
              break;
            }
            std::size_t j = i;
            while (j < cps.size() && !isPythonSpace(cps[j])) ++j;
            parts.push_back(Value::of(fromCodePoints(cps, i, j)));
            i = j;
            --maxsplit;
          }
        } else {
          const std::string separator = stringArgument(e, *sep, "separator");
          if (separator.empty()) fail(e.pos, "split() separator cannot be empty");
          std::size_t i = 0;
          while (maxsplit-- != 0) {
            const std::size_t j = s.find(separator, i);
            if (j == std::string::npos) break;
            parts.push_back(Value::of(s.substr(i, j - i)));
            i = j + separator.size();
          }
          parts.push_back(Value::of(s.substr(i)));
        }
        return Value::of(std::move(parts));
      }
      if (m == "replace") return Value::of(replace(e, s, 1));
      if (m == "join") {
        expectArguments(e, 2, {});
        if (e.operands.size() < 2) fail(e.pos, "join() needs a list of strings");
        std::string out;
        const ValueList items = iterate(eval(*e.operands[1]), e.pos);
        for (std::size_t i = 0; i < items.size(); ++i) {
          out += (i ? s : "") + stringArgument(e, items[i], "item");
          fits(out.size());
        }
        return Value::of(std::move(out));
      }
    }
    fail(e.pos, fmt::format("a {} has no method '{}'", typeName(self), m));
  }

  // str.replace(old, new[, count]) with the arguments from `first` on.
  std::string replace(const Expr& e, const std::string& s, std::size_t first) {
    expectArguments(e, first + 3, {});
    if (e.operands.size() < first + 2) fail(e.pos, "replace() needs the old and the new text");
    const std::string from = stringArgument(e, eval(*e.operands[first]), "to replace");
    const std::string to = stringArgument(e, eval(*e.operands[first + 1]), "replacement");
    std::int64_t count = -1;
    if (e.operands.size() > first + 2) {
      const Value c = eval(*e.operands[first + 2]);
      if (!isInteger(c)) fail(e.pos, "replace() count must be an integer");
      count = asInteger(c);
    }
    if (from.empty()) fail(e.pos, "replacing the empty string is not supported");
    std::string out;
    std::size_t i = 0;
    for (std::int64_t done = 0; count < 0 || done < count; ++done) {  // a negative count: every occurrence
      const std::size_t j = s.find(from, i);
      if (j == std::string::npos) break;
      out += s.substr(i, j - i) + to;
      fits(out.size());
      i = j + from.size();
    }
    return out + s.substr(i);
  }

  // json.dumps(v, indent=indent, ensure_ascii=False), within the limits (a
  // negative indent indents by nothing, as Python's).
  std::string toJson(const Value& v, std::optional<std::int64_t> indent, int level, SourcePos p) {
    spend(1);
    nests(level);
    const auto newline = [&](int depth) {
      const auto spaces = static_cast<std::size_t>(std::max<std::int64_t>(*indent, 0));
      std::size_t width = 0;
      if (__builtin_mul_overflow(spaces, static_cast<std::size_t>(depth), &width)) width = SIZE_MAX;
      fits(width);
      return "\n" + std::string(width, ' ');
    };
    switch (v.kind) {
      case Kind::kNone: return "null";
      case Kind::kBool: return v.boolean ? "true" : "false";
      case Kind::kInt: return std::to_string(v.integer);
      case Kind::kFloat:
        if (std::isnan(v.real)) return "NaN";
        if (std::isinf(v.real)) return v.real > 0 ? "Infinity" : "-Infinity";
        return pythonFloat(v.real);
      case Kind::kString: return jsonQuote(v.text);
      case Kind::kList: {
        if (v.list->empty()) return "[]";
        std::string out = "[";
        for (std::size_t i = 0; i < v.list->size(); ++i) {
          out += i ? (indent ? "," : ", ") : "";
          if (indent) out += newline(level + 1);
          out += toJson((*v.list)[i], indent, level + 1, p);
          fits(out.size());
        }
        return out + (indent ? newline(level) : "") + "]";
      }
      case Kind::kDict: {
        if (v.dict->empty()) return "{}";
        std::string out = "{";
        bool first = true;
        for (const auto& [k, x] : *v.dict) {
          out += first ? "" : (indent ? "," : ", ");
          if (indent) out += newline(level + 1);
          out += jsonQuote(k) + ": " + toJson(x, indent, level + 1, p);
          fits(out.size());
          first = false;
        }
        return out + (indent ? newline(level) : "") + "}";
      }
      default: fail(p, fmt::format("tojson: a {} is not JSON serializable", typeName(v)));
    }
  }

  Value filter(const Expr& e) {
    const Value v = eval(*e.operands[0]);
    const std::string& f = e.name;
    if (f == "default" || f == "d") {
      expectArguments(e, 3, {"default_value", "boolean"});
      const std::optional<Value> fallback = argument(e, 1, "default_value");
      const std::optional<Value> boolean = argument(e, 2, "boolean");
      const bool use = v.is(Kind::kUndefined) || (boolean && truthy(*boolean) && !truthy(v));
      return use ? fallback.value_or(Value::of(std::string())) : v;
    }
    if (f == "tojson") {
      expectArguments(e, 2, {"indent"});
      const std::optional<Value> indent = argument(e, 1, "indent");
      std::optional<std::int64_t> spaces;
      if (indent && !indent->is(Kind::kNone)) {
        if (!isInteger(*indent)) fail(e.pos, "tojson's indent must be an integer");
        spaces = asInteger(*indent);
      }
      return Value::of(toJson(v, spaces, 0, e.pos));
    }
    if (f == "length" || f == "count") {
      expectArguments(e, 1, {});
      switch (v.kind) {
        case Kind::kUndefined: return Value::of(std::int64_t{0});
        case Kind::kString: return Value::of(static_cast<std::int64_t>(codePoints(v.text).size()));
        case Kind::kList: return Value::of(static_cast<std::int64_t>(v.list->size()));
        case Kind::kDict: return Value::of(static_cast<std::int64_t>(v.dict->size()));
        default: fail(e.pos, fmt::format("object of type '{}' has no len()", typeName(v)));
      }
    }
    if (f == "safe") return v;
    if (f == "string") return Value::of(str(v));
    if (f == "trim") {
      expectArguments(e, 2, {"chars"});
      return Value::of(strip(str(v), charsArgument(e, 1), true, true));
    }
    if (f == "upper" || f == "lower") return Value::of(changeCase(str(v), f == "upper" ? upperCase : lowerCase));
    if (f == "capitalize") return Value::of(changeCase(str(v), capitalized));
    if (f == "title") return Value::of(jinjaTitle(str(v)));
    if (f == "replace") return Value::of(replace(e, str(v), 1));
    if (f == "abs") {
      if (!isNumber(v)) fail(e.pos, fmt::format("bad operand type for abs(): '{}'", typeName(v)));
      if (!isInteger(v)) return Value::ofReal(std::fabs(v.real));
      if (asInteger(v) == std::numeric_limits<std::int64_t>::min())
        fail(e.pos, fmt::format("abs({}) overflows 64-bit integers", asInteger(v)));
      return Value::of(std::abs(asInteger(v)));
    }
    if (f == "int" || f == "float") {
      if (v.is(Kind::kUndefined)) failUndefined(e.pos, v);
      expectArguments(e, 2, {"default"});
      const Value zero = f == "int" ? Value::of(std::int64_t{0}) : Value::ofReal(0);
      const Value fallback = argument(e, 1, "default").value_or(zero);
      if (isNumber(v)) return f == "int" ? toInteger(v, fallback, e.pos) : Value::ofReal(asReal(v));
      if (v.is(Kind::kString)) {
        try {
          std::size_t used = 0;
          const std::string t = strip(v.text, std::nullopt, true, true);
          if (f == "int") {
            const std::int64_t i = std::stoll(t, &used);
            if (used == t.size()) return Value::of(i);
          } else {
            const double d = std::stod(t, &used);
            if (used == t.size()) return Value::ofReal(d);
          }
        } catch (const std::exception&) {
        }
      }
      return fallback;
    }
    ValueList items = iterate(v, e.pos);
    if (f == "list") return Value::of(std::move(items));
    if (f == "first" || f == "last") {
      if (items.empty()) return Value::undefined(fmt::format("'{}' of an empty sequence", f));
      return f == "first" ? items.front() : items.back();
    }
    if (f == "reverse") {
      if (v.is(Kind::kString)) {
        std::string out;
        for (auto it = items.rbegin(); it != items.rend(); ++it) out += it->text;
        return Value::of(std::move(out));
      }
      std::reverse(items.begin(), items.end());
      return Value::of(std::move(items));
    }
    if (f == "items") {
      if (v.is(Kind::kUndefined)) return Value::of(ValueList{});
      if (!v.is(Kind::kDict)) fail(e.pos, fmt::format("items: a {} is not a mapping", typeName(v)));
      return Value::of(dictItems(v));
    }
    if (f == "join") {
      expectArguments(e, 3, {"d", "attribute"});
      const std::optional<Value> sep = argument(e, 1, "d");
      const std::optional<Value> attr = argument(e, 2, "attribute");
      std::string out;
      for (std::size_t i = 0; i < items.size(); ++i) {
        out += (i && sep ? str(*sep) : "") + str(attr ? attribute(items[i], str(*attr), e.pos) : items[i]);
        fits(out.size());
      }
      return Value::of(std::move(out));
    }
    if (f == "map") {
      expectArguments(e, 1, {"attribute", "default"});
      const std::optional<Value> attr = keyword(e, "attribute");
      if (!attr) fail(e.pos, "map is supported with attribute=... only");
      const std::optional<Value> fallback = keyword(e, "default");
      ValueList out;
      for (const Value& x : items) {
        Value a = attribute(x, str(*attr), e.pos);
        out.push_back(a.is(Kind::kUndefined) && fallback ? *fallback : a);
      }
      return Value::of(std::move(out));
    }
    // selectattr / rejectattr(attribute[, test[, argument]])
    if (e.operands.size() < 2) fail(e.pos, fmt::format("{} needs an attribute name", f));
    const std::string attr = str(eval(*e.operands[1]));
    std::string test_name;
    if (e.operands.size() > 2) {
      test_name = str(eval(*e.operands[2]));
      if (!isSupportedTest(test_name))
        fail(e.operands[2]->pos, fmt::format("the test '{}' is not supported; chat templates may use {}", test_name,
                                             supportedTests()));
    }
    ValueList out;
    for (const Value& x : items) {
      const Value a = attribute(x, attr, e.pos);
      bool pass;
      if (test_name.empty()) {
        pass = truthy(a);
      } else {
        Expr probe;
        probe.kind = Expr::Kind::kTest;
        probe.pos = e.pos;
        probe.name = test_name;
        probe.operands.push_back(nullptr);
        for (std::size_t k = 3; k < e.operands.size(); ++k) {
          auto lit = std::make_unique<Expr>();
          lit->kind = Expr::Kind::kLiteral;
          lit->pos = e.operands[k]->pos;
          lit->value = eval(*e.operands[k]);
          probe.operands.push_back(std::move(lit));
        }
        pass = test(probe, a);
      }
      if (pass == (f == "selectattr")) out.push_back(x);
    }
    return Value::of(std::move(out));
  }

  // Test `e.name` of `v` (e.operands[0] is the tested expression, not evaluated here).
  bool test(const Expr& e, const Value& v) {
    const std::string& t = e.name;
    if (t == "defined") return !v.is(Kind::kUndefined);
    if (t == "undefined") return v.is(Kind::kUndefined);
    if (t == "none") return v.is(Kind::kNone);
    if (t == "boolean") return v.is(Kind::kBool);
    if (t == "true") return v.is(Kind::kBool) && v.boolean;
    if (t == "false") return v.is(Kind::kBool) && !v.boolean;
    if (t == "integer") return v.is(Kind::kInt);
    if (t == "float") return v.is(Kind::kFloat);
    if (t == "number") return isNumber(v);
    if (t == "string") return v.is(Kind::kString);
    if (t == "mapping") return v.is(Kind::kDict);
    if (t == "iterable") return v.is(Kind::kList) || v.is(Kind::kDict) || v.is(Kind::kString) || v.is(Kind::kUndefined);
    if (t == "sequence") return v.is(Kind::kList) || v.is(Kind::kDict) || v.is(Kind::kString) || v.is(Kind::kUndefined);
    if (e.operands.size() < 2) {
      if (t == "odd" || t == "even") {
        if (!isNumber(v)) fail(e.pos, fmt::format("the test '{}' needs a number, got {}", t, typeName(v)));
        return pythonMod(asReal(v), 2) == (t == "odd" ? 1 : 0);
      }
      fail(e.pos, fmt::format("the test '{}' needs an argument", t));
    }
    const Value arg = eval(*e.operands[1]);
    if (t == "eq" || t == "equalto") return equals(v, arg);
    if (t == "ne") return !equals(v, arg);
    if (t == "in") return contains(arg, v, e.pos);
    if (t == "divisibleby") {
      if (!isNumber(v) || !isNumber(arg) || asReal(arg) == 0)
        fail(e.pos, "divisibleby needs numbers (and a divisor other than 0)");
      return pythonMod(asReal(v), asReal(arg)) == 0;
    }
    fail(e.pos, fmt::format("the test '{}' is not supported", t));
  }

  const std::string& origin_;
  std::optional<std::tm> now_;
  const ChatTemplateLimits& limits_;
  std::int64_t steps_ = 0;
  SourcePos at_;  // the statement or expression being evaluated
  std::vector<std::unordered_map<std::string, Value>> scopes_;
  std::string out_;
};

}  // namespace
}  // namespace detail

ChatTemplate::ChatTemplate(std::string_view source, std::string origin, ChatTemplateLimits limits)
    : origin_(std::move(origin)),
      limits_(limits),
      program_(std::make_shared<const std::vector<std::unique_ptr<detail::Node>>>(
          detail::parseChatTemplate(source, origin_))) {}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

ChatTemplateInputs chatTemplateInputs(const TokenizerSettings& settings, bool add_generation_prompt) {
  const auto token = [](const std::string& text) { return text.empty() ? std::nullopt : std::optional(text); };
  ChatTemplateInputs in;
  in.add_generation_prompt = add_generation_prompt;
  in.bos_token = token(settings.bos_token);
  in.eos_token = token(settings.eos_token);
  in.pad_token = token(settings.pad_token);
  in.unk_token = token(settings.unk_token);
  return in;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const ChatTemplateInputs& inputs) const {
  using detail::Value;
  detail::ValueDict globals{
      {"messages", detail::fromJson(messages)},
      {"add_generation_prompt", Value::of(inputs.add_generation_prompt)},
      {"tools", Value::none()},
      {"documents", Value::none()},
  };
  const std::pair<const char*, const std::optional<std::string>*> tokens[] = {
      {"bos_token", &inputs.bos_token},
      {"eos_token", &inputs.eos_token},
      {"pad_token", &inputs.pad_token},
      {"unk_token", &inputs.unk_token}};
  for (const auto& [name, text] : tokens)
    if (*text) globals.emplace_back(name, Value::of(**text));
  for (const char* function : {"namespace", "raise_exception", "range", "strftime_now"})
    globals.emplace_back(function, Value{Value::Kind::kFunction, false, 0, 0, function});
  return detail::Renderer(origin_, Value::of(std::move(globals)), inputs.now, limits_).run(*program_);
}

}  // namespace hpu::core::data
