// Agreement with the reference implementation, @huggingface/tokenizers, over
// more than 1 MB of varied text, for GPT-2, Llama 2 (two forms) and Llama 3
// tokenizers built from real vocabularies, and the real tokenizer files of
// Qwen2, Qwen2.5, Gemma and Gemma 2: make_fixtures.sh writes them,
// the documents and the reference's ids and decodes under
// build/tokenizer-fixtures/ (skipped when absent).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "hpu/core/base/file_io.h"
#include "hpu/core/data/tokenizer.h"

namespace hpu::core::data {
namespace {

namespace fs = std::filesystem;
const fs::path kCache = fs::path(HPU_BINARY_DIR) / "tokenizer-fixtures";

class ReferenceAgreement : public testing::TestWithParam<std::string> {};

TEST_P(ReferenceAgreement, EncodeAndDecodeEqualTheReference) {
  const fs::path dir = kCache / GetParam();
  if (!fs::exists(dir / "expected.json") || !fs::exists(kCache / "documents.json"))
    GTEST_SKIP() << "no reference data in " << kCache << "; run tests/tokenizers/make_fixtures.sh";
  const auto docs = nlohmann::json::parse(readFile((kCache / "documents.json").string())).get<std::vector<std::string>>();
  const auto expected = nlohmann::json::parse(readFile((dir / "expected.json").string()));
  ASSERT_EQ(expected.size(), docs.size());
  const auto tokenizer = loadTokenizer(dir);
  std::size_t bytes = 0, tokens = 0, mismatches = 0;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const auto want = expected[i]["ids"].get<std::vector<std::int64_t>>();
    const auto ids = tokenizer->encode(docs[i], "document " + std::to_string(i));
    bytes += docs[i].size();
    tokens += want.size();
    if (ids != want) {
      std::size_t at = 0;
      while (at < ids.size() && at < want.size() && ids[at] == want[at]) ++at;
      if (++mismatches <= 5)
        ADD_FAILURE() << "document " << i << ": token " << at << " differs (ours "
                      << (at < ids.size() ? std::to_string(ids[at]) : "end") << ", reference "
                      << (at < want.size() ? std::to_string(want[at]) : "end") << ") in "
                      << nlohmann::json(tokenizer->decode(std::vector<std::int64_t>(
                                            want.begin() + static_cast<std::ptrdiff_t>(at < 8 ? 0 : at - 8),
                                            want.begin() + static_cast<std::ptrdiff_t>(std::min(at + 8, want.size())))))
                             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      continue;
    }
    EXPECT_EQ(tokenizer->decode(ids), expected[i]["decoded"].get<std::string>()) << "document " << i;
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_GE(bytes, 1u << 20);
  std::printf("%s: %zu documents, %zu bytes, %zu tokens, %zu mismatched documents\n", GetParam().c_str(), docs.size(),
              bytes, tokens, mismatches);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, ReferenceAgreement,
                         testing::Values("gpt2", "llama2", "llama2-metaspace", "llama3", "qwen2", "qwen2_5", "gemma",
                                         "gemma2"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace hpu::core::data
