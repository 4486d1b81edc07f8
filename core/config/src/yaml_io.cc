#include "hpu/core/config/yaml_io.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "hpu/core/base/errors.h"

namespace hpu::core::config {
namespace {

// Builds a Node tree from yaml-cpp's parse events, checking what the
// node-based API lets through.
class TreeBuilder : public YAML::EventHandler {
 public:
  TreeBuilder(std::shared_ptr<const std::string> origin, bool file, int max_depth)
      : origin_(std::move(origin)), file_(file), max_depth_(max_depth) {}

  Node takeRoot() { return std::move(root_); }
  std::vector<std::string>& problems() { return problems_; }
  int documents() const { return documents_; }
  bool tooDeep() const { return depth_error_once_ > 0; }

  void OnDocumentStart(const YAML::Mark&) override { ++documents_; }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    add(Node::null(loc(mark)), anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto it = anchors_.find(anchor);
    Node n = it != anchors_.end() ? it->second : Node::null();
    n.setLoc(loc(mark));
    add(std::move(n), 0);
  }
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    const bool quoted = tag == "!";
    if (!quoted && isNullScalar(value))
      add(Node::null(loc(mark)), anchor);
    else
      add(Node::scalar(value, loc(mark), quoted), anchor);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(Node::sequence(loc(mark)), anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(Node::map(loc(mark)), anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    Node node;
    YAML::anchor_t anchor;
    bool expecting_key = true;  // maps alternate key, value
    std::string key;
    SourceLoc key_loc;
  };

  SourceLoc loc(const YAML::Mark& m) const { return {origin_, m.line + 1, m.column + 1, file_}; }

  void open(Node n, YAML::anchor_t anchor) {
    if (static_cast<int>(stack_.size()) >= max_depth_) {
      if (depth_error_once_++ == 0)
        problems_.push_back(n.loc().str() + ": nesting deeper than " + std::to_string(max_depth_) +
                            " levels");
    }
    if (!stack_.empty() && stack_.back().node.isMap() && stack_.back().expecting_key) {
      problems_.push_back(n.loc().str() + ": map keys must be plain strings");
    }
    stack_.push_back(Frame{std::move(n), anchor, true, {}, {}});
  }

  void close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    add(std::move(f.node), f.anchor);
  }

  void add(Node n, YAML::anchor_t anchor) {
    if (anchor != 0) anchors_[anchor] = n;
    if (stack_.empty()) {
      root_ = std::move(n);
      return;
    }
    Frame& top = stack_.back();
    if (top.node.isSequence()) {
      top.node.push(std::move(n));
      return;
    }
    if (top.expecting_key) {
      top.key = n.isScalar() ? n.str() : "null";
      top.key_loc = n.loc();
      top.expecting_key = false;
      return;
    }
    top.expecting_key = true;
    if (top.node.find(top.key) != nullptr) {
      const std::string path = pathTo(top.key);
      problems_.push_back(top.key_loc.str() + ": " + path + ": duplicate key (first defined at " +
                          top.node.find(top.key)->loc().str() + ")");
      return;  // keep the first, as yaml-cpp does, but report it
    }
    top.node.set(top.key, std::move(n));
  }

  std::string pathTo(const std::string& key) const {
    std::string path;
    for (std::size_t i = 0; i + 1 < stack_.size(); ++i) {
      const Frame& f = stack_[i];
      if (f.node.isMap())
        path = joinPath(path, f.key);
      else
        path = joinPath(path, "[" + std::to_string(f.node.items().size()) + "]");
    }
    return joinPath(path, key);
  }

  std::shared_ptr<const std::string> origin_;
  bool file_;
  int max_depth_;
  int depth_error_once_ = 0;
  int documents_ = 0;
  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, Node> anchors_;
  Node root_;
  std::vector<std::string> problems_;
};

bool needsQuotes(const std::string& s) {
  if (s.empty() || isNullScalar(s)) return true;
  static const char* kWords[] = {"true", "false", "yes", "no", "on", "off", "y", "n"};
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* w : kWords)
    if (lower == w) return true;
  // Anything that reads as a number must stay a string.
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  if (end != s.c_str() && *end == '\0') return true;
  if (lower == ".nan" || lower == ".inf" || lower == "-.inf" || lower == "+.inf") return true;
  if (std::strchr("-?:,[]{}#&*!|>'\"%@`", s.front()) != nullptr) return true;
  if (s.front() == ' ' || s.back() == ' ') return true;
  if (s.find(": ") != std::string::npos || s.find(" #") != std::string::npos) return true;
  if (s.back() == ':') return true;
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20) return true;
  return false;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string scalarText(const Node& n) {
  if (n.isNull()) return "null";
  return n.quoted() && needsQuotes(n.str()) ? quote(n.str()) : n.str();
}

bool isInline(const Node& n) {
  if (n.isSequence()) {
    for (const Node& i : n.items())
      if (!i.isScalar() && !i.isNull()) return false;
    return true;
  }
  if (n.isMap()) return n.entries().empty();
  return true;
}

std::string inlineText(const Node& n) {
  if (n.isMap()) return "{}";
  if (n.isSequence()) {
    std::string out = "[";
    for (std::size_t i = 0; i < n.items().size(); ++i) {
      if (i) out += ", ";
      out += scalarText(n.items()[i]);
    }
    return out + "]";
  }
  return scalarText(n);
}

class Emitter {
 public:
  explicit Emitter(const EmitOptions& o) : options_(o) {}
  std::string out;

  // Writes the entries of map `m` at `indent`. With `after_dash` the first
  // entry continues the current "- " line of a sequence item.
  void mapBody(const Node& m, int indent, const std::string& path, bool after_dash = false) {
    const std::string pad(indent, ' ');
    for (std::size_t i = 0; i < m.entries().size(); ++i) {
      const auto& [key, value] = m.entries()[i];
      const std::string child = joinPath(path, key);
      const std::string comment = options_.comment ? options_.comment(child) : "";
      if (i == 0 && after_dash) {
        if (!comment.empty()) out += "# " + comment + "\n" + pad;
      } else {
        if (!comment.empty()) out += pad + "# " + comment + "\n";
        out += pad;
      }
      out += needsQuotes(key) ? quote(key) : key;
      out += ":";
      value_(value, indent, child);
    }
  }

 private:
  // Writes a value after "key:" (or "-").
  void value_(const Node& v, int indent, const std::string& path) {
    if (isInline(v)) {
      out += " " + inlineText(v) + "\n";
      return;
    }
    out += "\n";
    if (v.isMap()) {
      mapBody(v, indent + 2, path);
      return;
    }
    for (std::size_t i = 0; i < v.items().size(); ++i) {
      const Node& item = v.items()[i];
      const std::string child = joinPath(path, "[" + std::to_string(i) + "]");
      out += std::string(indent, ' ') + "-";
      if (item.isMap() && !item.entries().empty()) {
        out += " ";
        mapBody(item, indent + 2, child, /*after_dash=*/true);
      } else {
        value_(item, indent + 2, child);
      }
    }
  }

  const EmitOptions& options_;
};

Node parse(std::istream& in, const std::string& origin, bool file, const LoadLimits& limits,
           std::vector<std::string>* problems) {
  auto origin_ptr = std::make_shared<const std::string>(origin);
  TreeBuilder builder(origin_ptr, file, limits.max_depth);
  try {
    YAML::Parser parser(in);
    if (parser.HandleNextDocument(builder) && parser.HandleNextDocument(builder))
      builder.problems().push_back(origin +
                                   ": several YAML documents ('---'); put one config per file");
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp gives up far below the stack limit with the message "bad file";
    // the depth cap has already said what is wrong, unless it is set higher.
    if (builder.problems().empty()) {
      const SourceLoc at{origin_ptr, e.mark.line + 1, e.mark.column + 1};
      builder.problems().push_back(at.str() + ": nesting too deep for the YAML parser");
    }
    throw ConfigError(std::move(builder.problems()));
  } catch (const YAML::ParserException& e) {
    const SourceLoc at{origin_ptr, e.mark.line + 1, e.mark.column + 1};
    throw ConfigError(at.str() + ": invalid YAML: " + e.msg);
  }
  if (problems != nullptr && !builder.tooDeep())
    problems->insert(problems->end(), builder.problems().begin(), builder.problems().end());
  else if (!builder.problems().empty())
    throw ConfigError(std::move(builder.problems()));
  return builder.takeRoot();
}

}  // namespace

bool isNullScalar(std::string_view s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

Node loadYamlFile(const std::string& path, const LoadLimits& limits, std::vector<std::string>* problems) {
  const auto tooBig = [&](const std::string& size) {
    return ConfigError(path + ": config file is " + size + " bytes; the limit is " + std::to_string(limits.max_bytes));
  };
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(status))
    throw ConfigError("cannot read config file '" + path + "': it is a directory");
  if (std::filesystem::is_regular_file(status)) {
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > limits.max_bytes) throw tooBig(std::to_string(size));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot read config file '" + path + "': " + std::strerror(errno));
  // Read up to one byte past the limit rather than asking for a size: a pipe
  // (--config <(...)) has none.
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= limits.max_bytes && in.read(chunk, sizeof chunk).gcount() > 0)
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
  if (in.bad()) throw ConfigError("cannot read config file '" + path + "': " + std::strerror(errno));
  if (text.size() > limits.max_bytes) throw tooBig("over " + std::to_string(limits.max_bytes));
  std::istringstream stream(std::move(text));
  return parse(stream, path, /*file=*/true, limits, problems);
}

Node loadYamlString(std::string_view text, const std::string& origin, const LoadLimits& limits,
                    std::vector<std::string>* problems) {
  if (text.size() > limits.max_bytes)
    throw ConfigError(origin + ": value is " + std::to_string(text.size()) +
                      " bytes; the limit is " + std::to_string(limits.max_bytes));
  std::istringstream in{std::string(text)};
  return parse(in, origin, /*file=*/false, limits, problems);
}

std::string emitYaml(const Node& root, const EmitOptions& options) {
  Emitter e(options);
  if (root.isMap() && !root.entries().empty()) {
    e.mapBody(root, 0, "");
    return e.out;
  }
  return inlineText(root) + "\n";
}

}  // namespace hpu::core::config
