#include "hpu/core/config/node.h"

#include <algorithm>

namespace hpu::core::config {

std::string SourceLoc::str() const {
  if (!origin) return "";
  if (line <= 0) return *origin;
  return *origin + ":" + std::to_string(line) + ":" + std::to_string(col);
}

Node Node::null(SourceLoc loc) {
  Node n;
  n.loc_ = std::move(loc);
  return n;
}

Node Node::scalar(std::string value, SourceLoc loc, bool quoted) {
  Node n;
  n.kind_ = Kind::kScalar;
  n.scalar_ = std::move(value);
  n.quoted_ = quoted;
  n.loc_ = std::move(loc);
  return n;
}

Node Node::sequence(SourceLoc loc) {
  Node n;
  n.kind_ = Kind::kSequence;
  n.loc_ = std::move(loc);
  return n;
}

Node Node::map(SourceLoc loc) {
  Node n;
  n.kind_ = Kind::kMap;
  n.loc_ = std::move(loc);
  return n;
}

const Node* Node::find(std::string_view key) const {
  for (const auto& [k, v] : entries_)
    if (k == key) return &v;
  return nullptr;
}

Node* Node::find(std::string_view key) {
  return const_cast<Node*>(static_cast<const Node*>(this)->find(key));
}

Node& Node::set(std::string key, Node value) {
  if (Node* existing = find(key)) {
    *existing = std::move(value);
    return *existing;
  }
  entries_.emplace_back(std::move(key), std::move(value));
  return entries_.back().second;
}

bool Node::erase(std::string_view key) {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const Entry& e) { return e.first == key; });
  if (it == entries_.end()) return false;
  entries_.erase(it);
  return true;
}

bool Node::operator==(const Node& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kNull: return true;
    case Kind::kScalar: return scalar_ == o.scalar_;
    case Kind::kSequence: return items_ == o.items_;
    case Kind::kMap: return entries_ == o.entries_;
  }
  return false;
}

namespace {
void flattenInto(const Node& n, const std::string& path, std::vector<std::pair<std::string, std::string>>& out) {
  switch (n.kind()) {
    case Node::Kind::kNull: out.emplace_back(path, "null"); return;
    case Node::Kind::kScalar: out.emplace_back(path, n.str()); return;
    case Node::Kind::kMap:
      if (n.entries().empty()) out.emplace_back(path, "{}");
      for (const auto& [k, v] : n.entries()) flattenInto(v, joinPath(path, k), out);
      return;
    case Node::Kind::kSequence: {
      bool scalars = true;
      for (const Node& i : n.items()) scalars = scalars && !i.isMap() && !i.isSequence();
      if (scalars) {
        std::string text = "[";
        for (std::size_t i = 0; i < n.items().size(); ++i)
          text += (i ? ", " : "") + (n.items()[i].isNull() ? std::string("null") : n.items()[i].str());
        out.emplace_back(path, text + "]");
        return;
      }
      for (std::size_t i = 0; i < n.items().size(); ++i)
        flattenInto(n.items()[i], joinPath(path, "[" + std::to_string(i) + "]"), out);
      return;
    }
  }
}
}  // namespace

std::vector<std::pair<std::string, std::string>> flatten(const Node& root) {
  std::vector<std::pair<std::string, std::string>> out;
  flattenInto(root, "", out);
  return out;
}

std::string joinPath(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  if (!key.empty() && key.front() == '[') return std::string(parent) + std::string(key);
  return std::string(parent) + "." + std::string(key);
}

}  // namespace hpu::core::config
