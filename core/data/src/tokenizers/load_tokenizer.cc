#include <spdlog/fmt/fmt.h>

#include "hpu/core/base/errors.h"
#include "hpu/core/data/tokenizer.h"

namespace hpu::core::data {

std::unique_ptr<Tokenizer> loadTokenizer(const std::filesystem::path& path) {
  throw DataError(fmt::format("{}: Hugging Face tokenizers are not supported yet", path.string()));
}

}  // namespace hpu::core::data
