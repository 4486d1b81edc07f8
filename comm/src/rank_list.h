// Compact rank lists for messages: {1,2,3,5,7,8} -> "1-3,5,7-8".
#pragma once

#include <string>
#include <vector>

namespace hpu::comm::detail {
// REQUIRES: ranks sorted ascending, no duplicates.
std::string formatRankList(const std::vector<int>& ranks);
}  // namespace hpu::comm::detail
