#include "hpu/cli/overrides.h"

#include <cctype>

#include "hpu/core/base/errors.h"

namespace hpu::cli {
namespace {

using core::config::Node;
using core::config::SourceLoc;

// Gives every node of a command-line value the same origin: positions inside
// a one-line value are noise in messages.
void relocate(Node& n, const SourceLoc& loc) {
  n.setLoc(loc);
  for (Node& i : n.items()) relocate(i, loc);
  for (auto& e : n.entries()) relocate(e.second, loc);
}

bool validKey(const std::string& key) {
  if (key.empty()) return false;
  for (char c : key)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return false;
  return key.front() != '.' && key.back() != '.';
}

}  // namespace

std::vector<core::config::Override> parseOverrides(const std::vector<std::string>& tokens) {
  static const auto origin = std::make_shared<const std::string>("command line");
  std::vector<core::config::Override> out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string& tok = tokens[i];
    if (tok.rfind("--", 0) != 0)
      throw core::UsageError("unexpected argument '" + tok +
                             "'; options are written --key=value or --key value");
    std::string key = tok.substr(2);
    std::string value;
    const auto eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key.resize(eq);
    } else {
      if (i + 1 >= tokens.size() || tokens[i + 1].rfind("--", 0) == 0)
        throw core::UsageError("option '--" + key + "' needs a value: --" + key + "=VALUE");
      value = tokens[++i];
    }
    bool append = false;
    if (!key.empty() && key.back() == '+') {
      append = true;
      key.pop_back();
    }
    if (!validKey(key))
      throw core::UsageError("'" + tok + "' is not an option; options are dotted keys like --trainer.max_epochs=3");
    core::config::Override o = core::config::textOverride(key, value, "command line (--" + key + ")");
    o.append = append;
    relocate(o.value, SourceLoc{origin});
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace hpu::cli
