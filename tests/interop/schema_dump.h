// hpu-train's config surface as JSON, for judges outside the process
// (check_lightning.py compares it with Lightning 2.4's signatures): the
// Trainer's keys and every registered component with its class path, the
// names it also answers to, and its init_args (type, default, the reason a
// key takes only its default, whether the key is hpu-train's own).
// `hpu_schema_dump` prints it; tests call schemaDump() in process.
#pragma once

#include <nlohmann/json.hpp>

#include "hpu/core/config/schema.h"

namespace hpu::core::config {

// {"trainer": [param...], "components": [{kind, name, class_path, module,
//  stands_in_for, short_name, init_args: [param...]}...]}, each param
// {name, type, default_yaml, default, only_default_because, own}, with
// `default` the YAML default as JSON (numbers, bools, null, strings; .inf
// as the string ".inf").
nlohmann::json schemaDump();
nlohmann::json paramsJson(const StructSchema& schema);

}  // namespace hpu::core::config
