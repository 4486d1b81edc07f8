#include "tokenizers/json_file.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>

#include "hpu/core/base/errors.h"

namespace hpu::core::data::detail {

nlohmann::json parseJson(const std::string& text, const std::string& origin) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based offset of the byte that failed.
    const std::size_t at = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const auto before = text.begin() + static_cast<std::ptrdiff_t>(at);
    const std::size_t line = 1 + static_cast<std::size_t>(std::count(text.begin(), before, '\n'));
    const std::size_t line_start = text.rfind('\n', at == 0 ? std::string::npos : at - 1);
    const std::size_t column = at - (line_start == std::string::npos ? 0 : line_start + 1) + 1;
    std::string reason = e.what();
    if (const std::size_t colon = reason.rfind(": "); colon != std::string::npos) reason = reason.substr(colon + 2);
    throw DataError(fmt::format("{}:{}:{}: not valid JSON: {}", origin, line, column, reason));
  }
}

}  // namespace hpu::core::data::detail
