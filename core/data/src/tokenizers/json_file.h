// JSON text to nlohmann::json, with errors that name the file, line and column.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace hpu::core::data::detail {

// Throws DataError "origin:line:column: not valid JSON (...)".
nlohmann::json parseJson(const std::string& text, const std::string& origin);

}  // namespace hpu::core::data::detail
