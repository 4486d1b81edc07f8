// Lexer and parser of chat templates: Jinja2's syntax, whitespace rules and
// operator precedence (jinja2/lexer.py and parser.py, 3.1) for the subset
// that chat templates use. The environment is transformers':
// trim_blocks (the newline after a block or comment tag is dropped),
// lstrip_blocks (spaces and tabs before a block or comment tag that starts
// its line are dropped), one trailing newline of the source dropped, and
// the loop controls (break, continue).
#include <spdlog/fmt/fmt.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "chat_template_syntax.h"
#include "hpu/core/base/errors.h"
#include "tokenizers/utf8.h"

namespace hpu::core::data::detail {
namespace {

constexpr std::array kFilters = {"abs",   "capitalize", "count", "d",         "default", "first",     "float",
                                 "int",   "items",      "join",  "last",      "length",  "list",      "lower",
                                 "map",   "rejectattr", "replace", "reverse", "safe",    "selectattr", "string",
                                 "title", "tojson",     "trim",  "upper"};
constexpr std::array kTests = {"boolean", "defined", "divisibleby", "eq",     "equalto", "even",  "false",
                               "float",   "in",      "integer",     "iterable", "mapping", "ne",   "none",
                               "number",  "odd",     "sequence",    "string", "true",    "undefined"};
constexpr std::array kFunctions = {"namespace", "raise_exception", "range", "strftime_now"};
constexpr std::array kMethods = {"capitalize", "endswith", "get",   "items",      "join",  "keys",  "lower",
                                 "lstrip",     "replace",  "rstrip", "split",     "startswith", "strip", "title",
                                 "upper",      "values"};

template <std::size_t N>
bool contains(const std::array<const char*, N>& names, std::string_view name) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}
template <std::size_t N>
std::string join(const std::array<const char*, N>& names) {
  std::string out;
  for (const char* n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

enum class Tok {
  kText,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEnd
};

struct Token {
  Tok type;
  std::string value;
  SourcePos pos;
};

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::kText:
      return "text";
    case Tok::kVariableBegin:
      return "'{{'";
    case Tok::kVariableEnd:
      return "'}}'";
    case Tok::kBlockBegin:
      return "'{%'";
    case Tok::kBlockEnd:
      return "'%}'";
    case Tok::kString:
      return "a string";
    case Tok::kEnd:
      return "the end of the template";
    default:
      return "'" + t.value + "'";
  }
}

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool isNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
 public:
  Lexer(std::string_view source, const std::string& origin) : origin_(origin) {
    // Newlines are \n, \r\n or \r, all read as \n; one trailing newline is dropped.
    for (std::size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> tokenize() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const std::size_t tag = findTag(pos_);
      std::string text = src_.substr(pos_, tag - pos_);
      const SourcePos text_pos = posAt(pos_);
      if (tag == src_.size()) {
        emitText(std::move(text), text_pos);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
      if (sign == '-') {
        while (!text.empty() && isSpace(text.back())) text.pop_back();
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: spaces before the tag on a line of their own.
        const std::size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (line_start > 0 || line_starting) {
          bool blank = true;
          for (std::size_t i = line_start; i < text.size(); ++i) blank = blank && isSpace(text[i]);
          if (blank) text.resize(line_start);
        }
      }
      emitText(std::move(text), text_pos);
      const SourcePos tag_pos = posAt(tag);
      pos_ = tag + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        line_starting = skipComment(tag_pos);
      } else {
        tokens_.push_back({kind == '{' ? Tok::kVariableBegin : Tok::kBlockBegin, "", tag_pos});
        line_starting = lexTag(kind == '{', tag_pos);
      }
    }
    tokens_.push_back({Tok::kEnd, "", posAt(src_.size())});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(SourcePos p, const std::string& message) const {
    throw DataError(fmt::format("{}:{}:{}: {}", origin_, p.line, p.column, message));
  }

  SourcePos posAt(std::size_t offset) {
    // Incremental: offsets only grow between calls, except for rare look-backs.
    if (offset < counted_) counted_ = 0, at_ = {};
    for (; counted_ < offset; ++counted_) {
      const auto c = static_cast<unsigned char>(src_[counted_]);
      if (c == '\n') {
        ++at_.line;
        at_.column = 1;
      } else if ((c & 0xC0) != 0x80) {
        ++at_.column;
      }
    }
    return at_;
  }

  std::size_t findTag(std::size_t from) const {
    for (std::size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  void emitText(std::string text, SourcePos p) {
    if (!text.empty()) tokens_.push_back({Tok::kText, std::move(text), p});
  }

  // After a tag's end: "-" strips the whitespace that follows; a block or
  // comment end without "+" drops one newline (trim_blocks). Returns whether
  // what was consumed ends with a newline (the next text starts a line).
  bool afterEnd(char sign, bool block) {
    bool newline = false;
    if (sign == '-') {
      while (pos_ < src_.size() && isSpace(src_[pos_])) newline = src_[pos_++] == '\n';
    } else if (sign != '+' && block && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      newline = true;
    }
    return newline;
  }

  bool skipComment(SourcePos begin) {
    const std::size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail(begin, "this comment has no end ('#}')");
    const char sign = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    pos_ = end + 2;
    return afterEnd(sign, true);
  }

  // The tokens of one {{ }} or {% %} tag, through its end.
  bool lexTag(bool variable, SourcePos begin) {
    int depth = 0;
    while (true) {
      if (pos_ >= src_.size())
        fail(begin, fmt::format("this tag has no end ('{}')", variable ? "}}" : "%}"));
      const std::string_view rest = std::string_view(src_).substr(pos_);
      if (depth == 0) {
        const std::string_view end = variable ? "}}" : "%}";
        for (const char sign : {'-', '+', '\0'}) {
          if (sign == '+' && variable) continue;
          const bool signed_end = sign != '\0';
          if (rest.size() >= end.size() + (signed_end ? 1 : 0) && (!signed_end || rest[0] == sign) &&
              rest.substr(signed_end ? 1 : 0, end.size()) == end) {
            tokens_.push_back({variable ? Tok::kVariableEnd : Tok::kBlockEnd, "", posAt(pos_)});
            pos_ += end.size() + (signed_end ? 1 : 0);
            return afterEnd(sign, !variable);
          }
        }
      }
      const char c = rest[0];
      const SourcePos p = posAt(pos_);
      if (isSpace(c)) {
        ++pos_;
      } else if (isNameStart(c)) {
        std::size_t n = 1;
        while (n < rest.size() && isNameChar(rest[n])) ++n;
        tokens_.push_back({Tok::kName, std::string(rest.substr(0, n)), p});
        pos_ += n;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lexNumber(p);
      } else if (c == '\'' || c == '"') {
        lexString(p);
      } else {
        static constexpr std::array kTwo = {"//", "**", "==", "!=", ">=", "<="};
        std::string op(1, c);
        for (const char* two : kTwo)
          if (rest.substr(0, 2) == two) op = two;
        if (op.size() == 1 && std::strchr("+-/*%~[](){}=.:|,<>", c) == nullptr)
          fail(p, fmt::format("unexpected character '{}' in a tag", c));
        if (op == "(" || op == "[" || op == "{") ++depth;
        if (op == ")" || op == "]" || op == "}") {
          if (depth == 0) fail(p, fmt::format("unexpected '{}'", op));
          --depth;
        }
        tokens_.push_back({Tok::kOperator, op, p});
        pos_ += op.size();
      }
    }
  }

  void lexNumber(SourcePos p) {
    std::size_t n = pos_;
    while (n < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[n])) || src_[n] == '_')) ++n;
    bool real = false;
    if (n + 1 < src_.size() && src_[n] == '.' && std::isdigit(static_cast<unsigned char>(src_[n + 1]))) {
      real = true;
      ++n;
      while (n < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[n])) || src_[n] == '_')) ++n;
    }
    if (n < src_.size() && (src_[n] == 'e' || src_[n] == 'E')) {
      std::size_t e = n + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
        real = true;
        n = e;
        while (n < src_.size() && std::isdigit(static_cast<unsigned char>(src_[n]))) ++n;
      }
    }
    std::string digits;
    for (std::size_t i = pos_; i < n; ++i)
      if (src_[i] != '_') digits += src_[i];
    tokens_.push_back({real ? Tok::kFloat : Tok::kInteger, digits, p});
    pos_ = n;
  }

  // A quoted string with Python's escapes (\n, \t, \', \\, \xNN, \uNNNN, ...).
  void lexString(SourcePos p) {
    const char quote = src_[pos_];
    std::string value;
    std::size_t i = pos_ + 1;
    const auto hex = [&](std::size_t digits) {
      if (i + digits > src_.size()) fail(p, "a truncated \\x, \\u or \\U escape in a string");
      char32_t cp = 0;
      for (std::size_t k = 0; k < digits; ++k) {
        const char h = src_[i + k];
        if (!std::isxdigit(static_cast<unsigned char>(h))) fail(p, "a malformed \\x, \\u or \\U escape in a string");
        const bool digit = std::isdigit(static_cast<unsigned char>(h)) != 0;
        cp = cp * 16 + static_cast<char32_t>(digit ? h - '0' : (h | 0x20) - 'a' + 10);
      }
      i += digits;
      appendUtf8(value, cp);
    };
    while (true) {
      if (i >= src_.size()) fail(p, "this string has no closing quote");
      const char c = src_[i];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) fail(p, "this string has no closing quote");
      const char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case '\n': break;  // a continued line
        case 'x': hex(2); break;
        case 'u': hex(4); break;
        case 'U': hex(8); break;
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k, ++i)
              cp = cp * 8 + static_cast<char32_t>(src_[i] - '0');
            appendUtf8(value, cp);
          } else {
            value += '\\';  // Python keeps an unknown escape as it is
            value += e;
          }
      }
    }
    tokens_.push_back({Tok::kString, std::move(value), p});
    pos_ = i + 1;
  }

  const std::string& origin_;
  std::string src_;
  std::size_t pos_ = 0;
  std::size_t counted_ = 0;
  SourcePos at_;
  std::vector<Token> tokens_;
};

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& origin) : tokens_(std::move(tokens)), origin_(origin) {}

  NodeList parseTemplate() {
    NodeList nodes = parseBody({});
    if (cur().type != Tok::kEnd) fail(cur().pos, "unexpected " + describe(cur()));
    return nodes;
  }

 private:
  const Token& cur() const { return tokens_[i_]; }
  const Token& peek(std::size_t ahead = 1) const { return tokens_[std::min(i_ + ahead, tokens_.size() - 1)]; }
  Token next() { return tokens_[i_ < tokens_.size() - 1 ? i_++ : i_]; }

  [[noreturn]] void fail(SourcePos p, const std::string& message) const {
    throw DataError(fmt::format("{}:{}:{}: {}", origin_, p.line, p.column, message));
  }
  bool isOp(std::string_view op) const { return cur().type == Tok::kOperator && cur().value == op; }
  bool isName(std::string_view name) const { return cur().type == Tok::kName && cur().value == name; }
  bool acceptOp(std::string_view op) {
    if (!isOp(op)) return false;
    next();
    return true;
  }
  bool acceptName(std::string_view name) {
    if (!isName(name)) return false;
    next();
    return true;
  }
  void expectOp(std::string_view op) {
    if (!acceptOp(op)) fail(cur().pos, fmt::format("expected '{}', got {}", op, describe(cur())));
  }
  std::string expectName(const char* what) {
    if (cur().type != Tok::kName) fail(cur().pos, fmt::format("expected {}, got {}", what, describe(cur())));
    return next().value;
  }
  void expectBlockEnd(const char* tag) {
    if (cur().type != Tok::kBlockEnd)
      fail(cur().pos, fmt::format("expected the end of the '{}' tag ('%}}'), got {}", tag, describe(cur())));
    next();
  }

  static ExprPtr make(Expr::Kind kind, SourcePos pos, std::string name = "") {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    e->name = std::move(name);
    return e;
  }
  static ExprPtr binary(std::string op, SourcePos pos, ExprPtr left, ExprPtr right) {
    ExprPtr e = make(Expr::Kind::kBinary, pos, std::move(op));
    e->operands.push_back(std::move(left));
    e->operands.push_back(std::move(right));
    return e;
  }

  // Nodes up to a block tag named in `ends` (left as the current token, after
  // its '{%') or the end of the template.
  // Counts the nesting of blocks and expressions while it lives: deeper than
  // kMaxDepth is refused (a template is input, and the parser recurses).
  class Nesting {
   public:
    Nesting(Parser& p, SourcePos pos) : p_(p) {
      if (++p_.depth_ > kMaxDepth)
        p_.fail(pos, fmt::format("the template nests blocks or expressions more than {} deep", kMaxDepth));
    }
    ~Nesting() { --p_.depth_; }

   private:
    Parser& p_;
  };
  static constexpr int kMaxDepth = 200;

  std::int64_t integer(const Token& t) const {
    errno = 0;
    const long long v = std::strtoll(t.value.c_str(), nullptr, 10);
    if (errno == ERANGE) fail(t.pos, "the integer " + t.value + " does not fit in 64 bits");
    return static_cast<std::int64_t>(v);
  }

  NodeList parseBody(const std::set<std::string>& ends) {
    const Nesting nesting(*this, cur().pos);
    NodeList nodes;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::kEnd) {
        if (!ends.empty())
          fail(t.pos, fmt::format("the template ends inside a block; expected '{{% {} %}}'", *ends.rbegin()));
        return nodes;
      }
      if (t.type == Tok::kText) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kText;
        n->pos = t.pos;
        n->text = t.value;
        nodes.push_back(std::move(n));
        next();
      } else if (t.type == Tok::kVariableBegin) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kOutput;
        n->pos = next().pos;
        n->expr = parseExpression(true);
        if (cur().type != Tok::kVariableEnd) fail(cur().pos, "expected '}}', got " + describe(cur()));
        next();
        nodes.push_back(std::move(n));
      } else if (t.type == Tok::kBlockBegin) {
        next();
        if (cur().type != Tok::kName) fail(cur().pos, "expected a tag name, got " + describe(cur()));
        if (ends.count(cur().value)) return nodes;
        if (auto n = parseStatement()) nodes.push_back(std::move(n));
      } else {
        fail(t.pos, "unexpected " + describe(t));
      }
    }
  }

  // A block tag's statement, from its name through its end; null for tags
  // that only structure (generation).
  std::unique_ptr<Node> parseStatement() {
    const Token tag = next();
    auto n = std::make_unique<Node>();
    n->pos = tag.pos;
    if (tag.value == "if") {
      n->kind = Node::Kind::kIf;
      open_.push_back("endif");
      ExprPtr condition = parseExpression(true);
      expectBlockEnd("if");
      while (true) {
        NodeList body = parseBody({"elif", "else", "endif"});
        n->branches.emplace_back(std::move(condition), std::move(body));
        const std::string end = next().value;
        if (end == "endif") {
          expectBlockEnd("endif");
          break;
        }
        if (end == "else") {
          expectBlockEnd("else");
          n->branches.emplace_back(nullptr, parseBody({"endif"}));
          next();
          expectBlockEnd("endif");
          break;
        }
        condition = parseExpression(true);
        expectBlockEnd("elif");
      }
      open_.pop_back();
    } else if (tag.value == "for") {
      n->kind = Node::Kind::kFor;
      do n->targets.push_back(expectName("a loop variable"));
      while (acceptOp(","));
      if (!acceptName("in")) fail(cur().pos, "expected 'in' in the 'for' tag, got " + describe(cur()));
      n->expr = parseExpression(false);
      if (acceptName("if")) n->filter = parseExpression(true);
      if (isName("recursive")) fail(cur().pos, "recursive loops are not supported");
      expectBlockEnd("for");
      open_.push_back("endfor");
      n->body = parseBody({"else", "endfor"});
      if (next().value == "else") {
        expectBlockEnd("else");
        n->else_body = parseBody({"endfor"});
        next();
      }
      expectBlockEnd("endfor");
      open_.pop_back();
    } else if (tag.value == "set") {
      n->kind = Node::Kind::kSet;
      n->targets.push_back(expectName("a variable name"));
      if (acceptOp(".")) n->attribute = expectName("an attribute name");
      if (isOp(",")) fail(cur().pos, "assigning several variables in one 'set' is not supported");
      if (!acceptOp("="))
        fail(cur().pos, isOp("|") || cur().type == Tok::kBlockEnd
                            ? "block assignments ({% set x %}...{% endset %}) are not supported"
                            : "expected '=' in the 'set' tag, got " + describe(cur()));
      n->expr = parseExpression(true);
      expectBlockEnd("set");
    } else if (tag.value == "break" || tag.value == "continue") {
      n->kind = tag.value == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      expectBlockEnd(tag.value.c_str());
    } else if (tag.value == "generation" || tag.value == "endgeneration") {
      // transformers' {% generation %} marks the assistant's tokens; it renders its body.
      expectBlockEnd(tag.value.c_str());
      return nullptr;
    } else if (tag.value == "elif" || tag.value == "else" || tag.value.rfind("end", 0) == 0) {
      fail(tag.pos, open_.empty() ? fmt::format("unexpected '{{% {} %}}' (no open block it closes)", tag.value)
                                  : fmt::format("unexpected '{{% {} %}}': the open block ends with '{{% {} %}}'",
                                                tag.value, open_.back()));
    } else {
      fail(tag.pos, fmt::format("the tag '{}' is not supported; chat templates may use if, elif, else, for, set, "
                                "break, continue and generation",
                                tag.value));
    }
    return n;
  }

  ExprPtr parseExpression(bool with_condition) {
    ExprPtr e = parseOr();
    while (with_condition && isName("if")) {
      const SourcePos p = next().pos;
      ExprPtr c = make(Expr::Kind::kCondition, p);
      c->operands.push_back(std::move(e));
      c->operands.push_back(parseOr());
      c->operands.push_back(acceptName("else") ? parseExpression(true) : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr parseOr() {
    ExprPtr e = parseAnd();
    while (isName("or")) {
      const SourcePos p = next().pos;
      e = binary("or", p, std::move(e), parseAnd());
    }
    return e;
  }
  ExprPtr parseAnd() {
    ExprPtr e = parseNot();
    while (isName("and")) {
      const SourcePos p = next().pos;
      e = binary("and", p, std::move(e), parseNot());
    }
    return e;
  }
  ExprPtr parseNot() {
    if (isName("not")) {
      ExprPtr e = make(Expr::Kind::kUnary, next().pos, "not");
      e->operands.push_back(parseNot());
      return e;
    }
    return parseCompare();
  }
  ExprPtr parseCompare() {
    ExprPtr e = parseMath1();
    while (true) {
      const SourcePos p = cur().pos;
      std::string op;
      if (cur().type == Tok::kOperator &&
          (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == ">" ||
           cur().value == "<=" || cur().value == ">=")) {
        op = next().value;
      } else if (isName("in")) {
        next();
        op = "in";
      } else if (isName("not") && peek().type == Tok::kName && peek().value == "in") {
        next();
        next();
        op = "not in";
      } else {
        return e;
      }
      e = binary(op, p, std::move(e), parseMath1());
    }
  }
  ExprPtr parseMath1() {
    ExprPtr e = parseConcat();
    while (isOp("+") || isOp("-")) {
      const Token op = next();
      e = binary(op.value, op.pos, std::move(e), parseConcat());
    }
    return e;
  }
  ExprPtr parseConcat() {
    ExprPtr e = parseMath2();
    while (isOp("~")) {
      const SourcePos p = next().pos;
      e = binary("~", p, std::move(e), parseMath2());
    }
    return e;
  }
  ExprPtr parseMath2() {
    ExprPtr e = parsePow();
    while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
      const Token op = next();
      e = binary(op.value, op.pos, std::move(e), parsePow());
    }
    return e;
  }
  ExprPtr parsePow() {
    ExprPtr e = parseUnary(true);
    while (isOp("**")) {
      const SourcePos p = next().pos;
      e = binary("**", p, std::move(e), parseUnary(true));
    }
    return e;
  }
  ExprPtr parseUnary(bool with_filter) {
    const Nesting nesting(*this, cur().pos);
    ExprPtr e;
    if (isOp("-") || isOp("+")) {
      const Token op = next();
      e = make(Expr::Kind::kUnary, op.pos, op.value);
      e->operands.push_back(parseUnary(false));
    } else {
      e = parsePrimary();
    }
    e = parsePostfix(std::move(e));
    return with_filter ? parseFilters(std::move(e)) : std::move(e);
  }

  ExprPtr parsePrimary() {
    const Token t = cur();
    switch (t.type) {
      case Tok::kName: {
        next();
        ExprPtr e = make(Expr::Kind::kLiteral, t.pos);
        if (t.value == "true" || t.value == "True") e->value = Value::of(true);
        else if (t.value == "false" || t.value == "False") e->value = Value::of(false);
        else if (t.value == "none" || t.value == "None") e->value = Value::none();
        else e = make(Expr::Kind::kName, t.pos, t.value);
        return e;
      }
      case Tok::kString: {
        std::string s;
        while (cur().type == Tok::kString) s += next().value;  // adjacent strings join
        ExprPtr e = make(Expr::Kind::kLiteral, t.pos);
        e->value = Value::of(std::move(s));
        return e;
      }
      case Tok::kInteger: {
        next();
        ExprPtr e = make(Expr::Kind::kLiteral, t.pos);
        e->value = Value::of(integer(t));
        return e;
      }
      case Tok::kFloat: {
        next();
        ExprPtr e = make(Expr::Kind::kLiteral, t.pos);
        e->value = Value::ofReal(std::strtod(t.value.c_str(), nullptr));  // inf beyond the range, as Python
        return e;
      }
      case Tok::kOperator:
        if (t.value == "(") {
          next();
          ExprPtr e = parseExpression(true);
          if (isOp(",")) fail(cur().pos, "tuples are not supported; use a list [a, b]");
          expectOp(")");
          return e;
        }
        if (t.value == "[") {
          next();
          ExprPtr e = make(Expr::Kind::kList, t.pos);
          while (!isOp("]")) {
            if (!e->operands.empty()) expectOp(",");
            if (isOp("]")) break;
            e->operands.push_back(parseExpression(true));
          }
          next();
          return e;
        }
        if (t.value == "{") {
          next();
          ExprPtr e = make(Expr::Kind::kDict, t.pos);
          while (!isOp("}")) {
            if (!e->operands.empty()) expectOp(",");
            if (isOp("}")) break;
            e->operands.push_back(parseExpression(true));
            expectOp(":");
            e->operands.push_back(parseExpression(true));
          }
          next();
          return e;
        }
        [[fallthrough]];
      default:
        fail(t.pos, "expected an expression, got " + describe(t));
    }
  }

  // Call arguments after '(': positional, then name=value.
  void parseArguments(Expr& call) {
    expectOp("(");
    while (!isOp(")")) {
      if (isOp("*") || isOp("**")) fail(cur().pos, "*args and **kwargs are not supported");
      if (cur().type == Tok::kName && peek().type == Tok::kOperator && peek().value == "=") {
        std::string key = next().value;
        next();
        call.keywords.emplace_back(std::move(key), parseExpression(true));
      } else {
        if (!call.keywords.empty()) fail(cur().pos, "a positional argument after a keyword argument");
        call.operands.push_back(parseExpression(true));
      }
      if (!acceptOp(",")) break;
    }
    expectOp(")");
  }

  ExprPtr parsePostfix(ExprPtr e) {
    while (true) {
      if (isOp(".")) {
        next();
        const Token t = cur();
        if (t.type == Tok::kInteger) {
          next();
          ExprPtr item = make(Expr::Kind::kItem, t.pos);
          item->operands.push_back(std::move(e));
          ExprPtr index = make(Expr::Kind::kLiteral, t.pos);
          index->value = Value::of(integer(t));
          item->operands.push_back(std::move(index));
          e = std::move(item);
          continue;
        }
        const std::string name = expectName("an attribute name");
        if (isOp("(")) {
          if (!isSupportedMethod(name))
            fail(t.pos, fmt::format("the method '{}' is not supported; chat templates may call {}", name,
                                    supportedMethods()));
          ExprPtr call = make(Expr::Kind::kMethod, t.pos, name);
          call->operands.push_back(std::move(e));
          parseArguments(*call);
          e = std::move(call);
        } else {
          ExprPtr attr = make(Expr::Kind::kAttribute, t.pos, name);
          attr->operands.push_back(std::move(e));
          e = std::move(attr);
        }
      } else if (isOp("[")) {
        const SourcePos p = next().pos;
        ExprPtr parts[3];
        bool slice = false;
        if (!isOp(":")) parts[0] = parseExpression(true);
        if (acceptOp(":")) {
          slice = true;
          if (!isOp(":") && !isOp("]")) parts[1] = parseExpression(true);
          if (acceptOp(":") && !isOp("]")) parts[2] = parseExpression(true);
        }
        expectOp("]");
        ExprPtr item = make(slice ? Expr::Kind::kSlice : Expr::Kind::kItem, p);
        item->operands.push_back(std::move(e));
        for (int k = 0; k < (slice ? 3 : 1); ++k) item->operands.push_back(std::move(parts[k]));
        e = std::move(item);
      } else if (isOp("(")) {
        if (e->kind != Expr::Kind::kName) fail(cur().pos, "only named functions and methods can be called");
        if (!isSupportedFunction(e->name))
          fail(e->pos, fmt::format("the function '{}' is not supported; chat templates may call {}", e->name,
                                   supportedFunctions()));
        ExprPtr call = make(Expr::Kind::kCall, e->pos, e->name);
        parseArguments(*call);
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  ExprPtr parseFilters(ExprPtr e) {
    while (true) {
      if (isOp("|")) {
        next();
        const Token t = cur();
        const std::string name = expectName("a filter name");
        if (!isSupportedFilter(name))
          fail(t.pos, fmt::format("the filter '{}' is not supported; chat templates may use {}", name,
                                  supportedFilters()));
        ExprPtr f = make(Expr::Kind::kFilter, t.pos, name);
        f->operands.push_back(std::move(e));
        if (isOp("(")) parseArguments(*f);
        e = std::move(f);
      } else if (isName("is")) {
        next();
        const bool negated = acceptName("not");
        const Token t = cur();
        const std::string name = expectName("a test name");
        if (!isSupportedTest(name))
          fail(t.pos,
               fmt::format("the test '{}' is not supported; chat templates may use {}", name, supportedTests()));
        ExprPtr test = make(Expr::Kind::kTest, t.pos, name);
        test->negated = negated;
        test->operands.push_back(std::move(e));
        if (isOp("(")) {
          parseArguments(*test);
        } else if ((cur().type == Tok::kName && cur().value != "else" && cur().value != "or" &&
                    cur().value != "and") ||
                   cur().type == Tok::kString || cur().type == Tok::kInteger || cur().type == Tok::kFloat ||
                   isOp("[") || isOp("{")) {
          // `x is divisibleby 3`: one argument without parentheses.
          test->operands.push_back(parsePostfix(parsePrimary()));
        }
        e = std::move(test);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> tokens_;
  std::size_t i_ = 0;
  std::vector<std::string> open_;  // the end tags of the blocks open at the current token
  int depth_ = 0;
  const std::string& origin_;
};

}  // namespace

bool isSupportedFilter(std::string_view name) { return contains(kFilters, name); }
bool isSupportedTest(std::string_view name) { return contains(kTests, name); }
bool isSupportedFunction(std::string_view name) { return contains(kFunctions, name); }
bool isSupportedMethod(std::string_view name) { return contains(kMethods, name); }
std::string supportedFilters() { return join(kFilters); }
std::string supportedTests() { return join(kTests); }
std::string supportedFunctions() { return join(kFunctions); }
std::string supportedMethods() { return join(kMethods); }

NodeList parseChatTemplate(std::string_view source, const std::string& origin) {
  return Parser(Lexer(source, origin).tokenize(), origin).parseTemplate();
}

}  // namespace hpu::core::data::detail
