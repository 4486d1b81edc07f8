#include "hpu/core/config/normalize.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "hpu/core/config/registry.h"
#include "hpu/core/config/scalars.h"

namespace hpu::core::config {
namespace {

using Tag = Type::Tag;

std::string describe(const Node& n) {
  switch (n.kind()) {
    case Node::Kind::kNull: return "null";
    case Node::Kind::kScalar: return "'" + n.str() + "'";
    case Node::Kind::kSequence: return "a list";
    case Node::Kind::kMap: return "a mapping";
  }
  return "?";
}

class Normalizer {
 public:
  Normalizer(std::vector<std::string>& problems, std::vector<std::string>* notes, bool template_only, bool partial,
             bool resolve_paths)
      : problems_(problems),
        notes_(notes),
        template_only_(template_only || partial),
        partial_(partial),
        resolve_paths_(resolve_paths) {}

  Node run(const Node& v, const Type& t, const std::string& path) {
    switch (t.tag()) {
      case Tag::kNull:
        if (!v.isNull()) fail(v, path, "expected null, got " + describe(v));
        return Node::null(v.loc());
      case Tag::kBool: return boolean(v, path);
      case Tag::kInt: return integer(v, t, path);
      case Tag::kFloat: return real(v, t, path);
      case Tag::kString: return string(v, t, path);
      case Tag::kDict:
        if (!v.isMap()) fail(v, path, "expected a mapping, got " + describe(v));
        return v;
      case Tag::kList: return list(v, t, path);
      case Tag::kComponent: return component(v, t.kinds(), path);
      case Tag::kStruct: return structure(v, *t.schema(), path);
      case Tag::kUnion: return anyOf(v, t, path);
    }
    return v;
  }

 private:
  void fail(const Node& at, const std::string& path, const std::string& message) {
    std::string prefix = at.loc().str();
    if (!prefix.empty()) prefix += ": ";
    problems_.push_back(prefix + (path.empty() ? "" : path + ": ") + message);
  }

  Node boolean(const Node& v, const std::string& path) {
    auto b = v.isScalar() && !v.quoted() ? parseBool(v.str()) : std::nullopt;
    if (!b) {
      fail(v, path, "expected bool (true/false/yes/no), got " + describe(v));
      return v;
    }
    return Node::scalar(*b ? "true" : "false", v.loc());
  }

  bool inRange(const Node& v, const Type& t, double x, const std::string& path) {
    auto bad = [&](const Type::Bound& b, const char* op, const char* op_ex) {
      fail(v, path,
           v.str() + " is out of range; must be " + (b.exclusive ? op_ex : op) + " " +
               formatNumber(b.value));
    };
    if (t.lower() && (x < t.lower()->value || (t.lower()->exclusive && x == t.lower()->value))) {
      bad(*t.lower(), ">=", ">");
      return false;
    }
    if (t.upper() && (x > t.upper()->value || (t.upper()->exclusive && x == t.upper()->value))) {
      bad(*t.upper(), "<=", "<");
      return false;
    }
    return true;
  }

  static std::string formatNumber(double x) {
    if (x == std::floor(x) && std::fabs(x) < 1e15) return std::to_string(static_cast<long long>(x));
    return formatFloat(x);
  }

  Node integer(const Node& v, const Type& t, const std::string& path) {
    auto i = v.isScalar() && !v.quoted() ? parseInt(v.str()) : std::nullopt;
    if (!i) {
      fail(v, path, "expected int, got " + describe(v));
      return v;
    }
    inRange(v, t, static_cast<double>(*i), path);
    return Node::scalar(std::to_string(*i), v.loc());
  }

  Node real(const Node& v, const Type& t, const std::string& path) {
    auto f = v.isScalar() && !v.quoted() ? parseFloat(v.str()) : std::nullopt;
    if (!f) {
      fail(v, path, "expected float, got " + describe(v));
      return v;
    }
    if (!std::isfinite(*f)) {
      fail(v, path, "expected a finite float, got " + describe(v));
      return v;
    }
    inRange(v, t, *f, path);
    return Node::scalar(formatFloat(*f), v.loc());
  }

  Node string(const Node& v, const Type& t, const std::string& path) {
    if (!v.isScalar()) {
      fail(v, path, "expected " + t.name() + ", got " + describe(v));
      return v;
    }
    if (const ForeignSpelling* f = t.foreignSpelling(v.str())) {
      if (f->to.empty()) {
        fail(v, path, "'" + v.str() + "': " + f->reason);
        return v;
      }
      note(v, path, "'" + v.str() + "' runs as " + f->to + (f->reason.empty() ? "" : " (" + f->reason + ")"));
      return Node::scalar(f->to, v.loc(), /*quoted=*/true);
    }
    if (!t.choices().empty()) {
      bool ok = false;
      for (const auto& c : t.choices()) ok = ok || c == v.str();
      if (!ok) {
        std::string list;
        for (const auto& c : t.choices()) list += (list.empty() ? "" : ", ") + c;
        fail(v, path,
             "'" + v.str() + "' is not one of " + list + didYouMean(v.str(), t.choices()));
        return v;
      }
    }
    if (const PathSpec* spec = t.pathSpec(); spec != nullptr && resolve_paths_ && !spec->literal(v.str())) {
      const ResolvedPath found = resolvePath(v, spec->kind, path);
      if (!found.problem.empty()) {
        problems_.push_back(found.problem);
        return v;
      }
      if (!found.note.empty() && notes_ != nullptr) notes_->push_back(found.note);
      return Node::scalar(found.path, v.loc(), /*quoted=*/true);
    }
    return Node::scalar(v.str(), v.loc(), /*quoted=*/true);
  }

  Node list(const Node& v, const Type& t, const std::string& path) {
    if (!v.isSequence()) {
      fail(v, path, "expected " + t.name() + ", got " + describe(v));
      return v;
    }
    Node out = Node::sequence(v.loc());
    for (std::size_t i = 0; i < v.items().size(); ++i)
      out.push(run(v.items()[i], t.args()[0], joinPath(path, "[" + std::to_string(i) + "]")));
    return out;
  }

  Node component(const Node& v, const std::vector<ComponentKind>& kinds, const std::string& path) {
    const SchemaRegistry& reg = SchemaRegistry::instance();
    const std::string kind_names = kindNames(kinds);
    const Node* name_node = nullptr;
    Node init = Node::map(v.loc());
    if (v.isScalar()) {
      name_node = &v;
    } else if (v.isMap()) {
      name_node = v.find("class_path");
      for (const auto& [key, value] : v.entries()) {
        if (key == "class_path") continue;
        if (key == "init_args") {
          if (value.isNull()) continue;
          if (!value.isMap()) {
            fail(value, joinPath(path, "init_args"), "expected a mapping, got " + describe(value));
            return v;
          }
          for (const auto& [k2, v2] : value.entries()) init.set(k2, v2);
        } else {
          init.set(key, value);  // shorthand: model.lr == model.init_args.lr
        }
      }
      if (name_node == nullptr) {
        if (partial_) return v;  // the class may be named in the source that could not be read
        fail(v, path, "missing class_path; expected a " + kind_names + " class" + registeredClasses(kinds));
        return v;
      }
    } else {
      fail(v, path, "expected a " + kind_names + " class name or {class_path, init_args}, got " +
                        describe(v));
      return v;
    }
    const Resolution found = name_node->isScalar() ? reg.resolve(kinds, name_node->str()) : Resolution{};
    const ComponentSchema* schema = found.schema;
    if (schema == nullptr) {
      const std::string name = name_node->isScalar() ? name_node->str() : describe(*name_node);
      fail(*name_node, path.empty() ? "class_path" : path, unknownClass(kinds, name));
      return v;
    }
    if (found.stand_in) note(*name_node, path, "'" + name_node->str() + "' runs as " + schema->classPath());
    Node out = Node::map(v.loc());
    out.set("class_path", Node::scalar(schema->classPath(), name_node->loc(), true));
    out.set("init_args", structure(init, schema->init_args, joinPath(path, "init_args")));
    return out;
  }

  void note(const Node& at, const std::string& path, const std::string& message) {
    if (notes_ == nullptr) return;
    std::string prefix = at.loc().str();
    if (!prefix.empty()) prefix += ": ";
    notes_->push_back(prefix + (path.empty() ? "" : path + ": ") + message);
  }

  Node structure(const Node& v, const StructSchema& schema, const std::string& path) {
    if (!v.isMap() && !v.isNull()) {
      fail(v, path, "expected a mapping, got " + describe(v));
      return v;
    }
    if (v.isMap()) {
      for (const auto& [key, value] : v.entries())
        if (schema.find(key) == nullptr)
          fail(value.loc().known() ? value : v, joinPath(path, key),
               "unknown key" + didYouMean(key, schema.paramNames()));
    }
    Node out = Node::map(v.loc());
    for (const ParamSpec& p : schema.params) {
      const std::string child = joinPath(path, p.name);
      const Node* given = v.isMap() ? v.find(p.name) : nullptr;
      if (given == nullptr && p.defaultValue().isNull() && !p.type.acceptsNull() && template_only_) {
        out.set(p.name, Node::null(v.loc()));  // a template leaves it for the user
        continue;
      }
      if (given == nullptr && p.defaultValue().isNull() && !p.type.acceptsNull()) {
        fail(v, child,
             p.type.tag() == Tag::kComponent
                 ? "missing required key; choose a " + p.type.name() + " class" + registeredClasses(p.type.kinds())
                 : "missing required key (" + p.type.name() + ")");
        continue;
      }
      if (given == nullptr) {  // a default names no file the user chose: it is read where it is used
        const bool resolve = std::exchange(resolve_paths_, false);
        out.set(p.name, run(p.defaultValue(), p.type, child));
        resolve_paths_ = resolve;
        continue;
      }
      Node value = run(*given, p.type, child);
      if (!p.only_default_because.empty() && !(value == run(p.defaultValue(), p.type, child)))
        fail(*given, child, "only the default (" + p.default_yaml + ") is supported: " + p.only_default_because);
      out.set(p.name, std::move(value));
    }
    return out;
  }

  // Which alternative a value's shape selects, so that errors come from the
  // alternative the user meant.
  static bool shapeFits(const Node& v, const Type& t) {
    switch (t.tag()) {
      case Tag::kNull: return v.isNull();
      case Tag::kBool:
      case Tag::kInt:
      case Tag::kFloat:
      case Tag::kString: return v.isScalar();
      case Tag::kDict:
      case Tag::kStruct: return v.isMap();
      case Tag::kList: return v.isSequence();
      case Tag::kComponent: return v.isScalar() || (v.isMap() && v.find("class_path"));
      case Tag::kUnion:
        for (const Type& a : t.args())
          if (shapeFits(v, a)) return true;
        return false;
    }
    return false;
  }

  Node anyOf(const Node& v, const Type& t, const std::string& path) {
    std::vector<const Type*> fitting;
    for (const Type& a : t.args())
      if (shapeFits(v, a)) fitting.push_back(&a);
    // A foreign spelling is the alternative that knows it.
    for (const Type* a : fitting)
      if (v.isScalar() && a->tag() == Tag::kString && a->foreignSpelling(v.str())) return run(v, *a, path);
    for (const Type* a : fitting) {
      std::vector<std::string> trial, trial_notes;
      Node out = Normalizer(trial, &trial_notes, template_only_, partial_, resolve_paths_).run(v, *a, path);
      if (trial.empty()) {
        if (notes_ != nullptr) notes_->insert(notes_->end(), trial_notes.begin(), trial_notes.end());
        return out;
      }
      if (fitting.size() == 1) {  // the only plausible reading: its errors are the useful ones
        // A name with keys that is no class's short name (a profiler's is).
        if (const Node* name = namedWithKeys(v, t);
            name != nullptr && SchemaRegistry::instance().resolve(a->kinds(), name->str()).schema == nullptr) {
          fail(*name, path, "'" + name->str() + "' is one of its names, which take no keys; to set keys, name a " +
                                kindNames(a->kinds()) + " class" + registeredClasses(a->kinds()));
          return v;
        }
        problems_.insert(problems_.end(), trial.begin(), trial.end());
        return v;
      }
    }
    // An alternative that reads the spelling but refuses the value (out of
    // range, not finite) says more than "expected A | B".
    for (const Type* a : fitting) {
      if (reads(v, *a)) {
        Normalizer(problems_, notes_, template_only_, partial_, resolve_paths_).run(v, *a, path);
        return v;
      }
    }
    std::vector<std::string> names;
    for (const Type* a : fitting) collectNames(*a, names);
    fail(v, path, "expected " + t.name() + ", got " + describe(v) +
                      (v.isScalar() ? didYouMean(v.str(), names) : ""));
    return v;
  }

  // The class_path of a component mapping `v` when it is a name that a
  // string alternative of union `t` takes (strategy: fsdp with keys), or null.
  static const Node* namedWithKeys(const Node& v, const Type& t) {
    const Node* name = v.isMap() ? v.find("class_path") : nullptr;
    if (name == nullptr || !name->isScalar()) return nullptr;
    for (const Type& a : t.args()) {
      if (a.tag() != Tag::kString) continue;
      const auto& c = a.choices();
      if (std::find(c.begin(), c.end(), name->str()) != c.end() || a.foreignSpelling(name->str()) != nullptr)
        return name;
    }
    return nullptr;
  }

  // Whether a plain scalar is spelled as a value of `t` (a number for int
  // and float, a bool word for bool), whatever its range.
  static bool reads(const Node& v, const Type& t) {
    if (!v.isScalar() || v.quoted()) return false;
    switch (t.tag()) {
      case Tag::kBool: return parseBool(v.str()).has_value();
      case Tag::kInt: return parseInt(v.str()).has_value();
      case Tag::kFloat: return parseFloat(v.str()).has_value();
      case Tag::kUnion:
        for (const Type& a : t.args())
          if (reads(v, a)) return true;
        return false;
      default: return false;
    }
  }

  static void collectNames(const Type& t, std::vector<std::string>& names) {
    if (t.tag() == Tag::kString) names.insert(names.end(), t.choices().begin(), t.choices().end());
    if (t.tag() == Tag::kComponent)
      for (ComponentKind k : t.kinds())
        for (const ComponentSchema* s : SchemaRegistry::instance().list(k)) names.push_back(s->classPath());
    if (t.tag() == Tag::kUnion)
      for (const Type& a : t.args()) collectNames(a, names);
  }

  std::vector<std::string>& problems_;
  std::vector<std::string>* notes_;
  bool template_only_;
  bool partial_;
  bool resolve_paths_;
};

}  // namespace

Node normalize(const Node& value, const Type& type, const std::string& path, std::vector<std::string>& problems,
               std::vector<std::string>* notes, bool template_only, bool partial, bool resolve_paths) {
  return Normalizer(problems, notes, template_only, partial, resolve_paths).run(value, type, path);
}

std::string componentName(const Node& value, const std::vector<ComponentKind>& kinds) {
  const Node* name = value.isScalar() ? &value : (value.isMap() ? value.find("class_path") : nullptr);
  if (name == nullptr || !name->isScalar()) return "";
  const ComponentSchema* s = SchemaRegistry::instance().resolve(kinds, name->str()).schema;
  return s ? s->name : "";
}

}  // namespace hpu::core::config
