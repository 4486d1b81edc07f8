// The chat-template engine's internals: the values a template computes with
// (Python's, as Jinja2 sees them), the syntax tree the parser builds
// (chat_template_parser.cc) and the evaluator walks (chat_template.cc).
// A parsed tree is immutable; values are copied or shared read-only, except
// a namespace()'s attributes, which `{% set ns.x = ... %}` changes during
// one render.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hpu::core::data::detail {

// Where a construct starts in the template: 1-based line and column
// (columns count characters).
struct SourcePos {
  int line = 1;
  int column = 1;
};

struct Value;
using ValueList = std::vector<Value>;
using ValueDict = std::vector<std::pair<std::string, Value>>;  // insertion order, as Python's dicts

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kFunction };
  Kind kind = Kind::kUndefined;
  bool boolean = false;
  std::int64_t integer = 0;
  double real = 0;
  // kString: the text. kUndefined: what was undefined, for messages
  // ("'x' is undefined"). kFunction: the global function's name (called
  // by name: the value only makes `f is defined` true, as in Jinja2).
  std::string text;
  std::shared_ptr<ValueList> list;  // kList
  std::shared_ptr<ValueDict> dict;  // kDict, kNamespace (a namespace's attributes)
  bool tuple = false;               // a kList that Python would print as a tuple

  static Value undefined(std::string what) { return {Kind::kUndefined, false, 0, 0, std::move(what)}; }
  static Value none() { return {Kind::kNone}; }
  static Value of(bool b) { return {Kind::kBool, b}; }
  static Value of(std::int64_t i) { return {Kind::kInt, false, i}; }
  static Value ofReal(double d) { return {Kind::kFloat, false, 0, d}; }
  static Value of(std::string s) { return {Kind::kString, false, 0, 0, std::move(s)}; }
  static Value of(ValueList l, bool tuple = false) {
    Value v{Kind::kList};
    v.list = std::make_shared<ValueList>(std::move(l));
    v.tuple = tuple;
    return v;
  }
  static Value of(ValueDict d, Kind kind = Kind::kDict) {
    Value v{kind};
    v.dict = std::make_shared<ValueDict>(std::move(d));
    return v;
  }
  bool is(Kind k) const { return kind == k; }
  // A dict's (or namespace's) entry, or nullptr.
  const Value* find(std::string_view key) const {
    if (!dict) return nullptr;
    for (const auto& [k, v] : *dict)
      if (k == key) return &v;
    return nullptr;
  }
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // operands: the items
    kDict,       // operands: key, value, key, value, ...
    kAttribute,  // operands[0].name
    kItem,       // operands[0][operands[1]]
    kSlice,      // operands[0][operands[1]:operands[2]:operands[3]] (null: omitted)
    kCall,       // global function `name`(operands, keywords)
    kMethod,     // operands[0].name(operands[1..], keywords)
    kFilter,     // operands[0] | name(operands[1..], keywords)
    kTest,       // operands[0] is [not] name(operands[1..])
    kUnary,      // name: "not", "-", "+"
    kBinary,     // operands[0] name operands[1]; name: "or", "and", "==", "in", "not in", "+", "~", ...
    kCondition,  // operands[0] if operands[1] else operands[2] (null: undefined)
  };
  Kind kind;
  SourcePos pos;
  std::string name;
  Value value;
  std::vector<ExprPtr> operands;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  bool negated = false;  // kTest: "is not"
};

struct Node;
using NodeList = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches: (condition or null for else, body)
    kFor,       // for targets in expr [if filter]: body [else: else_body]
    kSet,       // set targets[0] = expr, or set targets[0].attribute = expr
    kBreak,
    kContinue,
  };
  Kind kind;
  SourcePos pos;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::string attribute;
  std::vector<std::pair<ExprPtr, NodeList>> branches;
  NodeList body, else_body;
};

// Parses `source` (Jinja2 with trim_blocks and lstrip_blocks, as
// transformers compiles chat templates). Throws DataError
// "<origin>:<line>:<column>: ..." for a syntax error or a construct outside
// the supported subset.
NodeList parseChatTemplate(std::string_view source, const std::string& origin);

// The names the parser accepts; the evaluator implements exactly these.
bool isSupportedFilter(std::string_view name);
bool isSupportedTest(std::string_view name);
bool isSupportedFunction(std::string_view name);
bool isSupportedMethod(std::string_view name);
std::string supportedFilters();
std::string supportedTests();
std::string supportedFunctions();
std::string supportedMethods();

}  // namespace hpu::core::data::detail
