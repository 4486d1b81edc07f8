// Text data for language models: tokenizers, TextDataModule's blocks and
// splits, its errors, and RandomTokensDataModule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "hpu/core/data/datamodule.h"
#include "hpu/core/data/tokenizer.h"
#include "test_support.h"

namespace hpu::core::data {
namespace {

using core::testing::errorOf;
using core::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<DataModule> textData(const std::string& init_args) {
  return core::testing::buildComponent<DataModule>(config::ComponentKind::kDataModule,
                                                   "class_path: TextDataModule\ninit_args: " + init_args, "data");
}

// Every sample of a data set: its input_ids and labels.
std::vector<std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>> samples(const Dataset& d) {
  const std::int64_t block = d.fields()[0].shape[0];
  std::vector<std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>> out;
  for (std::int64_t i = 0; i < d.size(); ++i) {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(block)), labels(ids.size());
    const std::int64_t index[] = {i};
    const FieldBuffer buffers[] = {{nullptr, ids.data()}, {nullptr, labels.data()}};
    d.fetch(index, buffers);
    out.emplace_back(ids, labels);
  }
  return out;
}

TEST(Tokenizer, ByteAndCharRoundTripAndCountTheirVocabulary) {
  const std::string text = "naïve café: 3 € ";
  const auto byte = makeByteTokenizer();
  EXPECT_EQ(byte->vocabSize(), 256);
  EXPECT_EQ(byte->encode(text, "t").size(), text.size());
  EXPECT_EQ(byte->decode(byte->encode(text, "t")), text);
  const auto chars = makeCharTokenizer(text, "t");
  EXPECT_EQ(chars->vocabSize(), 12);  // n a ï v e space c f é : 3 €
  EXPECT_EQ(chars->encode(text, "t").size(), 16u);
  EXPECT_EQ(chars->decode(chars->encode(text, "t")), text);
  EXPECT_EQ(chars->encode(" ", "t"), (std::vector<std::int64_t>{0})) << "numbered in code-point order";
  EXPECT_EQ(errorOf<DataError>([&] { chars->encode("z", "prompt"); }),
            "prompt: the character U+007A is not in the corpus the char tokenizer was built from");
  EXPECT_EQ(errorOf<DataError>([] { makeCharTokenizer("ok\xff rest", "corpus.txt"); }),
            "corpus.txt: byte 2 (0xff) at offset 2 is not valid UTF-8; tokenizer char needs UTF-8 text (tokenizer "
            "byte takes any bytes)");
  EXPECT_THROW(makeCharTokenizer("\xc3", "t"), DataError) << "a truncated sequence";
  EXPECT_THROW(makeCharTokenizer("\xc0\x80", "t"), DataError) << "an overlong form";
}

TEST(TextDataModule, BlocksAreNextTokenPairsAndValidationIsTheEndOfTheText) {
  TempDir dir;
  const std::string path = (dir.path() / "corpus.txt").string();
  core::testing::writeBytes(path, "abcdefghijklmnopqrstuvwxyz0123");  // 30 bytes
  auto dm = textData("{path: " + path + ", block_size: 4, val_split: 0.2}");
  dm->setup(Stage::kFit);
  // 24 training tokens: (24 - 1) / 4 = 5 blocks; the last 6 tokens validate: 1 block.
  const auto train = samples(*dm->dataset(Split::kTrain));
  ASSERT_EQ(train.size(), 5u);
  EXPECT_EQ(train[1].first, (std::vector<std::int64_t>{'e', 'f', 'g', 'h'}));
  EXPECT_EQ(train[1].second, (std::vector<std::int64_t>{'f', 'g', 'h', 'i'}));
  const auto val = samples(*dm->dataset(Split::kVal));
  ASSERT_EQ(val.size(), 1u);
  EXPECT_EQ(val[0].first, (std::vector<std::int64_t>{'y', 'z', '0', '1'}));
  EXPECT_EQ(dm->tokenizer()->name(), "byte");
  EXPECT_TRUE(dm->loaderOptions(Split::kTrain).sampler.shuffle);
  EXPECT_EQ(dm->dataset(Split::kPredict), nullptr) << "a language model predicts from its prompts";
}

TEST(TextDataModule, AFolderIsReadInNameOrderWithoutLinksOrExcludedFiles) {
  TempDir dir;
  core::testing::writeBytes((dir.path() / "b").string(), "BBBB");
  core::testing::writeBytes((dir.path() / "a").string(), "AAAA");
  core::testing::writeBytes((dir.path() / "a.dat").string(), "\x01\x02");
  std::filesystem::create_symlink(dir.path() / "a", dir.path() / "a.u8");
  auto dm = textData("{path: " + dir.path().string() + ", exclude: ['*.dat'], block_size: 2, val_split: 0.0}");
  dm->setup(Stage::kFit);
  const auto train = samples(*dm->dataset(Split::kTrain));
  ASSERT_EQ(train.size(), 3u);  // AAAABBBB: (8 - 1) / 2
  EXPECT_EQ(train[0].first, (std::vector<std::int64_t>{'A', 'A'}));
  EXPECT_EQ(train[2].second, (std::vector<std::int64_t>{'B', 'B'}));
  EXPECT_EQ(dm->dataset(Split::kVal), nullptr);
}

TEST(TextDataModule, BadTextIsRefusedWithWhatToChange) {
  TempDir dir;
  const std::string empty = (dir.path() / "empty.txt").string(), short_text = (dir.path() / "short.txt").string(),
                    latin1 = (dir.path() / "latin1.txt").string();
  core::testing::writeBytes(empty, "");
  core::testing::writeBytes(short_text, "0123456789");
  core::testing::writeBytes(latin1, "caf\xe9");
  EXPECT_EQ(errorOf<DataError>([&] { textData("{path: " + empty + "}")->setup(Stage::kFit); }),
            "data.init_args.path: " + empty + " is empty: there is no text to learn from");
  EXPECT_EQ(errorOf<DataError>([&] { textData("{path: " + short_text + ", block_size: 16}")->setup(Stage::kFit); }),
            "data.init_args.block_size=16 needs at least 17 tokens of training text, and " + short_text +
                " has 9 (10 tokens of byte in all, val_split 0.1); lower block_size");
  EXPECT_EQ(errorOf<DataError>([&] { textData("{path: " + short_text + ", block_size: 4}")->setup(Stage::kFit); }),
            "data.init_args.block_size=4 needs at least 5 tokens of validation text, and " + short_text +
                " has 1 (10 tokens of byte in all, val_split 0.1); lower block_size or raise val_split");
  EXPECT_THAT(errorOf<DataError>(
                  [&] { textData("{path: " + latin1 + ", tokenizer: char, block_size: 1}")->setup(Stage::kFit); }),
              HasSubstr("latin1.txt: byte 3 (0xe9) at offset 3 is not valid UTF-8"));
  EXPECT_THAT(errorOf<DataError>([&] { textData("{path: /no/such/corpus}")->setup(Stage::kFit); }),
              HasSubstr("/no/such/corpus does not exist"));
}

TEST(RandomTokensDataModule, SeededTokensInTheVocabulary) {
  const auto make = [](int seed) {
    auto dm = core::testing::buildComponent<DataModule>(
        config::ComponentKind::kDataModule,
        "class_path: RandomTokensDataModule\ninit_args: {vocab_size: 7, block_size: 5, num_samples: 20, seed: " +
            std::to_string(seed) + "}",
        "data");
    dm->setup(Stage::kFit);
    return samples(*dm->dataset(Split::kTrain));
  };
  const auto a = make(1), b = make(1), c = make(2);
  ASSERT_EQ(a.size(), 20u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (const auto& [ids, labels] : a)
    for (std::int64_t t : ids) EXPECT_TRUE(t >= 0 && t < 7);
  EXPECT_EQ(std::vector<std::int64_t>(a[0].first.begin() + 1, a[0].first.end()),
            std::vector<std::int64_t>(a[0].second.begin(), a[0].second.end() - 1));
}

}  // namespace
}  // namespace hpu::core::data
