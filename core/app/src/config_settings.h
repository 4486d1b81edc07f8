// Changing a composed config as the command line would, for the searches of
// `estimate` (fit suggestions, plan): dotted keys and YAML values applied
// and the tree validated again, so a component whose class changes gets its
// new class's defaults.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hpu/core/app/run.h"

namespace hpu::core::app {

using Settings = std::vector<std::pair<std::string, std::string>>;

// `run` with `settings` ("trainer.strategy", "hpu_deepspeed_stage_3") applied
// in order. Throws UsageError naming the first problem.
RunRequest withSettings(const RunRequest& run, const Settings& settings);

// The node at `path` of `root`, or null.
const config::Node* configAt(const config::Node& root, std::initializer_list<std::string_view> path);

}  // namespace hpu::core::app
