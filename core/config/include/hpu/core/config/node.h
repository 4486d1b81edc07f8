// A config tree: the YAML data model (null, scalar, sequence, ordered map)
// where every node remembers where it came from (file:line:col, a command
// line argument, an environment variable), so every error can point at it.
// Values are plain data; copying a Node copies the subtree. Not thread-safe
// for concurrent mutation.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hpu::core::config {

// Where a value came from. `origin` is a file path, "command line" or an
// environment variable's name; line/col are 1-based and 0 when unknown.
// `file`: origin is the path of the config file that holds the value (a
// relative path in it is read from the file's folder: config/paths.h).
struct SourceLoc {
  std::shared_ptr<const std::string> origin;
  int line = 0;
  int col = 0;
  bool file = false;

  bool known() const { return origin != nullptr; }
  // "configs/a.yaml:12:5", "command line", "" when unknown.
  std::string str() const;
};

class Node {
 public:
  enum class Kind { kNull, kScalar, kSequence, kMap };
  using Entry = std::pair<std::string, Node>;

  Node() = default;
  static Node null(SourceLoc loc = {});
  // `quoted` marks a scalar written in quotes: it is a string even if it
  // reads as null, a bool or a number.
  static Node scalar(std::string value, SourceLoc loc = {}, bool quoted = false);
  static Node sequence(SourceLoc loc = {});
  static Node map(SourceLoc loc = {});

  Kind kind() const { return kind_; }
  bool isNull() const { return kind_ == Kind::kNull; }
  bool isScalar() const { return kind_ == Kind::kScalar; }
  bool isSequence() const { return kind_ == Kind::kSequence; }
  bool isMap() const { return kind_ == Kind::kMap; }
  const SourceLoc& loc() const { return loc_; }
  void setLoc(SourceLoc loc) { loc_ = std::move(loc); }

  // Scalars.
  const std::string& str() const { return scalar_; }
  bool quoted() const { return quoted_; }

  // Sequences.
  const std::vector<Node>& items() const { return items_; }
  std::vector<Node>& items() { return items_; }
  void push(Node n) { items_.push_back(std::move(n)); }

  // Maps keep insertion order; keys are unique.
  const std::vector<Entry>& entries() const { return entries_; }
  std::vector<Entry>& entries() { return entries_; }
  const Node* find(std::string_view key) const;
  Node* find(std::string_view key);
  // Inserts or replaces `key`, keeping its position if present.
  Node& set(std::string key, Node value);
  bool erase(std::string_view key);

  // Structural equality of values (locations are ignored).
  bool operator==(const Node& other) const;

 private:
  Kind kind_ = Kind::kNull;
  std::string scalar_;
  bool quoted_ = false;
  std::vector<Node> items_;
  std::vector<Entry> entries_;
  SourceLoc loc_;
};

// Every scalar of the tree as (key path, text), in document order; lists of
// scalars are one entry ("[1, 2]"). Ranks compare these at rendezvous.
std::vector<std::pair<std::string, std::string>> flatten(const Node& root);

// Joins a key path for messages: ("trainer", "max_epochs") -> "trainer.max_epochs";
// list indices are written as "[3]".
std::string joinPath(std::string_view parent, std::string_view key);

}  // namespace hpu::core::config
