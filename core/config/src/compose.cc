#include "hpu/core/config/compose.h"

#include <cctype>
#include <functional>
#include <optional>

#include "hpu/core/config/normalize.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/scalars.h"
#include "hpu/core/config/yaml_io.h"
#include "hpu/core/base/errors.h"

namespace hpu::core::config {
namespace {

using Tag = Type::Tag;

// The alternative of a union that a node of this shape is (or will be).
const Type* effective(const Type* t, const Node& n) {
  if (t == nullptr || t->tag() != Tag::kUnion) return t;
  const Type* fallback = nullptr;
  for (const Type& a : t->args()) {
    const Type* e = effective(&a, n);
    if (e == nullptr) continue;
    switch (e->tag()) {
      case Tag::kComponent:
        if (n.isMap() || n.isScalar()) return e;
        break;
      case Tag::kStruct:
      case Tag::kDict:
        if (n.isMap()) return e;
        break;
      case Tag::kList:
        if (n.isSequence()) return e;
        if (!fallback) fallback = e;
        break;
      default: break;
    }
  }
  return fallback;
}

const StructSchema* componentSchema(const Node& n, const Type& t) {
  const ComponentSchema* s = SchemaRegistry::instance().resolve(t.kinds(), componentName(n, t.kinds())).schema;
  return s ? &s->init_args : nullptr;
}

// Rewrites a component node into {class_path, init_args} form in place,
// moving shorthand keys into init_args.
void toFullForm(Node& n) {
  if (n.isScalar()) {
    Node full = Node::map(n.loc());
    full.set("class_path", n);
    full.set("init_args", Node::map(n.loc()));
    n = std::move(full);
    return;
  }
  if (n.isNull()) n = Node::map(n.loc());
  if (!n.isMap()) return;
  Node* init = n.find("init_args");
  if (init == nullptr || init->isNull()) init = &n.set("init_args", Node::map(n.loc()));
  if (!init->isMap()) return;  // validation names it
  std::vector<Node::Entry> shorthand;
  for (auto& e : n.entries())
    if (e.first != "class_path" && e.first != "init_args") shorthand.push_back(e);
  for (auto& [k, v] : shorthand) {
    n.erase(k);
    n.find("init_args")->set(k, v);
  }
}

const Type* paramType(const StructSchema* s, const std::string& key) {
  if (s == nullptr) return nullptr;
  const ParamSpec* p = s->find(key);
  return p ? &p->type : nullptr;
}

void mergeMaps(Node& base, const Node& overlay, const StructSchema* schema) {
  for (const auto& [key, value] : overlay.entries()) {
    Node* existing = base.find(key);
    const Type* t = paramType(schema, key);
    if (existing != nullptr && t != nullptr)
      mergeInto(*existing, value, *t);
    else
      base.set(key, value);
  }
}

bool sameClass(const Node& a, const Node& b, const Type& t) {
  const std::string na = componentName(a, t.kinds());
  const std::string nb = componentName(b, t.kinds());
  return !na.empty() && na == nb;
}

bool isIndex(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::vector<std::string> splitPath(const std::string& path) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : path) {
    if (c == '.') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

struct Walker {
  const Override& o;
  std::vector<std::string>& problems;
  std::vector<std::string> segs;

  void fail(const std::string& message) {
    std::string where = o.value.loc().str();
    problems.push_back((where.empty() ? "" : where + ": ") + o.path + ": " + message);
  }

  // Whether `t` takes free text and not a value of `shape`'s kind.
  static bool textOnly(const Type& t, const Node& shape) {
    switch (t.tag()) {
      case Tag::kString: return t.choices().empty();
      case Tag::kUnion: {
        bool text = false;
        for (const Type& a : t.args()) {
          if (a.tag() == Tag::kString && a.choices().empty()) text = true;
          const bool takes_map = a.tag() == Tag::kDict || a.tag() == Tag::kStruct || a.tag() == Tag::kComponent;
          if ((shape.isMap() && takes_map) || (shape.isSequence() && a.tag() == Tag::kList)) return false;
        }
        return text;
      }
      default: return false;
    }
  }

  // The override's value for a key of type `t` (see Override::text).
  std::optional<Node> valueFor(const Type* t) {
    const bool unread = !o.yaml_problems.empty();
    if (!o.text.empty() && t != nullptr && (unread || !o.value.isScalar()) && textOnly(*t, o.value))
      return Node::scalar(o.text, o.value.loc(), /*quoted=*/true);
    if (unread) {
      problems.insert(problems.end(), o.yaml_problems.begin(), o.yaml_problems.end());
      return std::nullopt;
    }
    return o.value;
  }

  void assign(Node& slot, const Type* t) {
    std::optional<Node> value = valueFor(t && t->tag() == Tag::kList && o.append ? &t->args()[0] : t);
    if (!value) return;
    if (o.append) {
      if (slot.isNull()) slot = Node::sequence(o.value.loc());
      const Type* lt = effective(t, slot);
      if (slot.isMap() || (slot.isScalar() && lt && lt->tag() == Tag::kComponent)) {
        Node seq = Node::sequence(o.value.loc());  // a single component becomes a list of one
        seq.push(slot);
        slot = std::move(seq);
      }
      if (!slot.isSequence()) return fail("'+=' appends to a list, but this key holds " + slot.str());
      slot.push(*value);
      return;
    }
    if (t != nullptr)
      mergeInto(slot, *value, *t);
    else
      slot = *value;
  }

  void walk(Node& node, const Type* t, std::size_t i) {
    const std::string& key = segs[i];
    const bool last = i + 1 == segs.size();
    const Type* e = effective(t, node);
    if (node.isSequence() || (node.isNull() && e && e->tag() == Tag::kList)) {
      const Type* elem = e && e->tag() == Tag::kList ? &e->args()[0] : nullptr;
      if (isIndex(key)) {
        const std::size_t idx = std::stoul(key);
        if (idx >= node.items().size())
          return fail("index " + key + " is past the end of a list of " +
                      std::to_string(node.items().size()));
        return last ? assign(node.items()[idx], elem) : walk(node.items()[idx], elem, i + 1);
      }
      if (node.items().empty())
        return fail("the list is empty; add an item first with --" +
                    o.path.substr(0, o.path.rfind('.')) + "+=<ClassName>");
      return walk(node.items().back(), elem, i);  // keys of a list apply to its last item
    }
    if (e && e->tag() == Tag::kComponent && key == "class_path" && last && !o.append && o.value.isScalar())
      return mergeInto(node, o.value, *e);  // as "--model X": another class drops the init_args
    if (e && e->tag() == Tag::kComponent && key != "class_path") {
      toFullForm(node);
      const StructSchema* s = componentSchema(node, *e);
      Node& init = *node.find("init_args");
      if (!init.isMap() && !(key == "init_args" && last))
        return fail("cannot set a key inside init_args, which holds " + init.str());
      if (key == "init_args") {
        if (last) return assign(init, nullptr);
        return descend(init, s, i + 1);
      }
      return descend(init, s, i);
    }
    if (node.isNull() || node.isScalar()) node = Node::map(o.value.loc());
    if (!node.isMap()) return fail("cannot set a key inside a " + std::string("non-mapping value"));
    const StructSchema* s = e && e->tag() == Tag::kStruct ? e->schema() : nullptr;
    descend(node, s, i);
  }

  void descend(Node& map, const StructSchema* s, std::size_t i) {
    const std::string& key = segs[i];
    const Type* t = paramType(s, key);
    Node* child = map.find(key);
    if (child == nullptr) child = &map.set(key, Node::null(o.value.loc()));
    if (i + 1 == segs.size()) return assign(*child, t);
    walk(*child, t, i + 1);
  }
};

}  // namespace

void mergeInto(Node& base, const Node& overlay, const Type& type) {
  const Type* e = effective(&type, overlay);
  // A component merges with a class name or a mapping; anything else replaces it, and
  // validation names it.
  if (e && e->tag() == Tag::kComponent && (base.isMap() || base.isScalar()) && (overlay.isMap() || overlay.isScalar())) {
    const bool names_class = overlay.isScalar() || overlay.find("class_path") != nullptr;
    if (names_class && !sameClass(base, overlay, *e)) {
      base = overlay;  // another class: its init_args start from its defaults
      return;
    }
    if (overlay.isScalar()) return;  // the same class named again keeps its init_args
    Node full = overlay;
    toFullForm(full);
    toFullForm(base);
    // Both are mappings now, each with init_args, which validation names if not a mapping.
    if (!base.find("init_args")->isMap() || !full.find("init_args")->isMap()) {
      base = overlay;
      return;
    }
    if (const Node* cls = full.find("class_path")) base.set("class_path", *cls);
    mergeMaps(*base.find("init_args"), *full.find("init_args"), componentSchema(base, *e));
    return;
  }
  if (e && e->tag() == Tag::kStruct && base.isMap() && overlay.isMap()) {
    mergeMaps(base, overlay, e->schema());
    return;
  }
  base = overlay;
}

Override textOverride(std::string path, const std::string& text, const std::string& origin) {
  Override o{std::move(path), Node::null(), false, text, {}};
  try {
    o.value = loadYamlString(text, origin);
  } catch (const ConfigError& e) {
    o.yaml_problems = e.problems();
  }
  return o;
}

void applyOverride(Node& root, const Type& type, const Override& o,
                   std::vector<std::string>& problems) {
  Walker w{o, problems, splitPath(o.path)};
  for (const auto& s : w.segs)
    if (s.empty()) return w.fail("empty key in dotted path");
  if (root.isNull()) root = Node::map();
  w.walk(root, &type, 0);
}

std::vector<Override> envOverrides(const Environment& env,
                                   const std::string& subcommand,
                                   std::vector<std::string>& problems) {
  auto enabled = [&](const char* name) {
    const auto value = env.get(name);
    if (!value) return false;
    const auto on = parseBool(*value);
    if (!on)
      problems.push_back("environment " + std::string(name) + ": expected true or false, got '" + *value + "'");
    return on.value_or(false);
  };
  std::vector<Override> out;
  const bool json_switch = enabled("JSONARGPARSE_DEFAULT_ENV");
  const bool hpu_switch = enabled("HPU_DEFAULT_ENV");
  if (!json_switch && !hpu_switch) return out;
  std::string prefix = "PL_";
  for (char c : subcommand) prefix += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  prefix += "__";
  for (const auto& [name, value] : env.variables()) {  // the catalogue's PL_<SUBCOMMAND>__<KEY>
    if (name.rfind(prefix, 0) != 0) continue;
    std::string path;
    const std::string rest = name.substr(prefix.size());
    for (std::size_t i = 0; i < rest.size(); ++i) {
      if (rest.compare(i, 2, "__") == 0) {
        path += '.';
        ++i;
      } else {
        path += static_cast<char>(std::tolower(static_cast<unsigned char>(rest[i])));
      }
    }
    try {
      Node v = loadYamlString(value, name);
      v.setLoc({std::make_shared<const std::string>("environment " + name)});
      out.push_back({path, std::move(v), false});
    } catch (const ConfigError& e) {
      problems.insert(problems.end(), e.problems().begin(), e.problems().end());
    }
  }
  return out;
}

Node composeConfig(const ConfigSources& sources, const Type& root_type, std::vector<std::string>* notes) {
  // Every problem of every source, in command-line order, then validation's:
  // a file that cannot be read (a syntax error) or an override that cannot be
  // applied leaves the others to be merged and validated all the same, so a
  // user sees every error at once. The tree then lacks what the broken source
  // held, so validation takes it as partial (no "missing" problems).
  std::vector<std::string> problems;
  bool partial = false;
  Node root = Node::map();
  std::vector<std::function<Node()>> loads;
  for (const ConfigDocument& d : sources.documents)
    loads.emplace_back([&d, &problems] { return loadYamlString(d.text, d.origin, {}, &problems); });
  for (const std::string& file : sources.files)
    loads.emplace_back([&file, &problems] { return loadYamlFile(file, {}, &problems); });
  for (const auto& load : loads) {  // a duplicate key leaves the file whole
    try {
      Node doc = load();
      if (doc.isNull()) continue;
      if (!doc.isMap()) {
        problems.push_back(doc.loc().str() + ": a config file must be a mapping of keys");
        partial = true;
        continue;
      }
      mergeInto(root, doc, root_type);
    } catch (const ConfigError& e) {
      problems.insert(problems.end(), e.problems().begin(), e.problems().end());
      partial = true;
    }
  }
  const std::size_t before_overrides = problems.size();
  for (const Override& o : envOverrides(sources.env, sources.subcommand, problems))
    applyOverride(root, root_type, o, problems);
  for (const Override& o : sources.overrides) applyOverride(root, root_type, o, problems);
  partial = partial || problems.size() > before_overrides;
  // A template (--print_config) shows paths as given; a run reads them.
  Node out = normalize(root, root_type, "", problems, notes, sources.template_only, partial,
                       /*resolve_paths=*/!sources.template_only);
  if (!problems.empty()) throw ConfigError(std::move(problems));
  return out;
}

}  // namespace hpu::core::config
