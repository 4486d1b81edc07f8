// Validation: checks a merged config tree against a type and returns it in
// canonical form — every default filled in, components as
// {class_path: CanonicalName, init_args: {...}}, scalars in canonical
// spelling, strings marked as strings. Canonical trees print with
// --print_config and load back to an equal tree.
#pragma once

#include <string>
#include <vector>

#include "hpu/core/config/node.h"
#include "hpu/core/config/schema.h"

namespace hpu::core::config {

// Appends every problem as "file:line:col: key.path: message" (location
// omitted when unknown) and returns the canonical tree, which is meaningful
// only when no problem was added. What was rewritten on the way (a GPU
// spelling to its HPU counterpart) is appended to `notes`, in the same form.
// With `partial` (a source of the tree could not be read, so what it held
// is missing), a required key or a class_path left out is no problem either.
// With `template_only`, a required key left out is null instead of a
// problem (the template --print_config writes before a model is chosen).
// With `resolve_paths`, every path-typed value the tree gives (not a default)
// is resolved by paths.h's rule: a path found nowhere is a problem, the value
// becomes the path found, the working-directory fallback is a note.
Node normalize(const Node& value, const Type& type, const std::string& path, std::vector<std::string>& problems,
               std::vector<std::string>* notes = nullptr, bool template_only = false,
               bool partial = false, bool resolve_paths = false);

// The name of the registered class a component node (string or
// {class_path: ...}) names by the class-path rule, or "" if it names none
// of `kinds`.
std::string componentName(const Node& value, const std::vector<ComponentKind>& kinds);

}  // namespace hpu::core::config
