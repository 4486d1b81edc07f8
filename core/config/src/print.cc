#include "hpu/core/config/print.h"

#include <map>

#include "hpu/core/config/normalize.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/yaml_io.h"

namespace hpu::core::config {
namespace {

using Tag = Type::Tag;

// The alternative of `t` that a canonical value `v` belongs to.
const Type* alternativeOf(const Node& v, const Type& t) {
  if (t.tag() != Tag::kUnion) return &t;
  for (const Type& a : t.args()) {
    std::vector<std::string> problems;
    normalize(v, a, "", problems);
    if (problems.empty()) return alternativeOf(v, a);
  }
  return nullptr;
}

class Printer {
 public:
  explicit Printer(const PrintOptions& o) : options_(o) {}
  std::map<std::string, std::string> comments;

  // Returns the value to print, pruned per the options.
  Node visit(const Node& v, const Type& t, const std::string& path) {
    const Type* a = alternativeOf(v, t);
    if (a == nullptr) return v;
    if (a->tag() == Tag::kStruct && v.isMap()) return fields(v, *a->schema(), path);
    if (a->tag() == Tag::kComponent && v.isMap()) {
      const ComponentSchema* s = SchemaRegistry::instance().resolve(a->kinds(), v.find("class_path")->str()).schema;
      Node out = Node::map();
      out.set("class_path", *v.find("class_path"));
      comments[joinPath(path, "class_path")] = s->doc;
      // As jsonargparse: a class without init_args is its class_path alone.
      Node init = fields(*v.find("init_args"), s->init_args, joinPath(path, "init_args"));
      if (!init.entries().empty()) out.set("init_args", std::move(init));
      return out;
    }
    if (a->tag() == Tag::kList && v.isSequence()) {
      Node out = Node::sequence();
      for (std::size_t i = 0; i < v.items().size(); ++i)
        out.push(visit(v.items()[i], a->args()[0], joinPath(path, "[" + std::to_string(i) + "]")));
      return out;
    }
    return v;
  }

 private:
  Node fields(const Node& v, const StructSchema& schema, const std::string& path) {
    Node out = Node::map();
    for (const ParamSpec& p : schema.params) {
      const Node* value = v.find(p.name);
      if (value == nullptr) continue;
      if (options_.skip_null && value->isNull()) continue;
      if (options_.skip_default || p.own) {
        std::vector<std::string> problems;
        if (normalize(p.defaultValue(), p.type, "", problems) == *value && problems.empty()) continue;
      }
      const std::string child = joinPath(path, p.name);
      comments[child] = p.doc + " (type: " + p.type.name() + ", default: " + p.default_yaml + ")";
      out.set(p.name, visit(*value, p.type, child));
    }
    return out;
  }

  const PrintOptions& options_;
};

}  // namespace

std::string printConfig(const Node& config, const Type& type, const PrintOptions& options) {
  Printer printer(options);
  const Node pruned = printer.visit(config, type, "");
  EmitOptions emit;
  if (options.comments) {
    emit.comment = [&](const std::string& path) {
      auto it = printer.comments.find(path);
      return it == printer.comments.end() ? std::string() : it->second;
    };
  }
  return emitYaml(pruned, emit);
}

}  // namespace hpu::core::config
