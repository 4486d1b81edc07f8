#include "hparams.h"

#include "hpu/core/config/scalars.h"

namespace hpu::core {
namespace {

using config::Node;

// Python's repr() of a value (`nested`: inside a list or dict, where strings
// are quoted) or str() at the top.
std::string python(const Node& n, bool nested) {
  switch (n.kind()) {
    case Node::Kind::kNull:
      return "None";
    case Node::Kind::kScalar: {
      const std::string& s = n.str();
      if (!n.quoted()) {
        if (auto b = config::parseBool(s)) return *b ? "True" : "False";
        if (auto i = config::parseInt(s)) return std::to_string(*i);
        if (auto f = config::parseFloat(s)) return config::formatFloat(*f);
      }
      return nested ? "'" + s + "'" : s;
    }
    case Node::Kind::kSequence: {
      std::string out = "[";
      for (const Node& item : n.items()) out += (out.size() > 1 ? ", " : "") + python(item, true);
      return out + "]";
    }
    case Node::Kind::kMap: {
      std::string out = "{";
      for (const auto& [k, v] : n.entries()) out += (out.size() > 1 ? ", '" : "'") + k + "': " + python(v, true);
      return out + "}";
    }
  }
  return "";
}

void flatten(const Node& n, const std::string& prefix, const std::string& delimiter, std::vector<Hparam>& out) {
  for (const auto& [k, v] : n.entries()) {
    const std::string key = prefix.empty() ? k : prefix + delimiter + k;
    if (v.isMap() && !v.entries().empty()) {
      flatten(v, key, delimiter, out);
      continue;
    }
    Hparam h{key, python(v, false), python(v, false)};
    if (v.isScalar() && !v.quoted()) {
      if (auto b = config::parseBool(v.str()))
        h.value = *b;
      else if (auto i = config::parseInt(v.str()))
        h.value = static_cast<double>(*i);
      else if (auto f = config::parseFloat(v.str()))
        h.value = *f;
    }
    out.push_back(std::move(h));
  }
}

}  // namespace

std::vector<Hparam> flattenHparams(const Node& hparams, const std::string& delimiter) {
  std::vector<Hparam> out;
  if (hparams.isMap()) flatten(hparams, "", delimiter, out);
  return out;
}

}  // namespace hpu::core
