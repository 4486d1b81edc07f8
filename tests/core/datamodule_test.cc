// The built-in data modules, built from config as a run builds them:
// MNIST-format modules on small IDX files (split, normalisation, errors) and
// on the real Fashion-MNIST files when installed; CSVDataModule's happy
// paths and every error message; RandomDataModule's determinism.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <set>

#include "hpu/core/data/datamodule.h"
#include "idx_files.h"
#include "test_support.h"

namespace hpu::core::data {
namespace {

using ::testing::HasSubstr;
using testing::buildComponent;
using testing::errorOf;
using testing::TempDir;
using testing::writeBytes;

std::unique_ptr<DataModule> dataModule(const std::string& class_path, const std::string& init_args) {
  return buildComponent<DataModule>(config::ComponentKind::kDataModule,
                                    "class_path: " + class_path + "\ninit_args: {" + init_args + "}", "data");
}

struct Samples {
  std::vector<float> x;
  std::vector<std::int64_t> y;
};
// The features of one sample ("x"), and whether samples carry labels ("y").
std::vector<std::int64_t> sampleShape(const Dataset& d) { return d.field("x")->shape; }
bool labelled(const Dataset& d) { return d.field("y") != nullptr; }

Samples fetchAll(const Dataset& d) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(d.size()));
  std::iota(idx.begin(), idx.end(), 0);
  Samples s;
  s.x.resize(static_cast<std::size_t>(d.size() * d.fields()[0].numel()));
  s.y.resize(static_cast<std::size_t>(d.size()));
  std::vector<FieldBuffer> out{{s.x.data(), nullptr}, {nullptr, s.y.data()}};
  out.resize(d.fields().size());
  d.fetch(idx, out);
  if (!labelled(d)) s.y.clear();
  return s;
}

// ------------------------------------------------------------------ MNIST-format modules on small files

// `n` train and `n_test` test images of 2 x 3 pixels; pixel 0 of image i is
// 10 * i, its label i % 10 (labels can be overridden).
class SmallIdxFiles : public ::testing::Test {
 protected:
  void write(int n, int n_test, std::vector<std::uint8_t> labels = {}) {
    auto images = [](int count) {
      std::vector<std::uint8_t> px(static_cast<std::size_t>(count * 6), 200);
      for (int i = 0; i < count; ++i) px[static_cast<std::size_t>(i * 6)] = static_cast<std::uint8_t>(10 * i);
      return px;
    };
    auto classes = [](int count) {
      std::vector<std::uint8_t> y;
      for (int i = 0; i < count; ++i) y.push_back(static_cast<std::uint8_t>(i % 10));
      return y;
    };
    if (labels.empty()) labels = classes(n);
    writeGzip(dir.file("train-images-idx3-ubyte.gz"),
              idxBytes(3, {static_cast<std::uint32_t>(n), 2, 3}, images(n)));
    writeBytes(dir.file("train-labels-idx1-ubyte"),
               idxBytes(1, {static_cast<std::uint32_t>(labels.size())}, labels));
    writeBytes(dir.file("t10k-images-idx3-ubyte"), idxBytes(3, {static_cast<std::uint32_t>(n_test), 2, 3}, images(n_test)));
    writeGzip(dir.file("t10k-labels-idx1-ubyte.gz"), idxBytes(1, {static_cast<std::uint32_t>(n_test)}, classes(n_test)));
  }
  std::unique_ptr<DataModule> mnist(const std::string& more = "") {
    return dataModule("MNISTDataModule", "data_dir: '" + dir.path().string() + "'" + (more.empty() ? "" : ", " + more));
  }
  // Image ids (pixel 0 / 10) of a split, undoing MNIST's normalisation.
  static std::vector<int> ids(const Dataset& d) {
    const Samples s = fetchAll(d);
    std::vector<int> out;
    for (std::int64_t i = 0; i < d.size(); ++i) {
      const double v = (s.x[static_cast<std::size_t>(i * 6)] * 0.3081 + 0.1307) * 255.0;
      out.push_back(static_cast<int>(std::lround(v / 10.0)));
      EXPECT_EQ(s.y[static_cast<std::size_t>(i)], out.back() % 10) << "label travels with its image";
    }
    return out;
  }
  TempDir dir;
};

TEST_F(SmallIdxFiles, SplitsTrainIntoDisjointSeededTrainAndValidation) {
  write(20, 7);
  auto dm = mnist("val_split: 5, seed: 3");
  dm->setup(Stage::kFit);
  const auto train = ids(*dm->dataset(Split::kTrain)), val = ids(*dm->dataset(Split::kVal));
  EXPECT_EQ(train.size(), 15u);
  EXPECT_EQ(val.size(), 5u);
  std::set<int> all(train.begin(), train.end());
  all.insert(val.begin(), val.end());
  EXPECT_EQ(all.size(), 20u) << "disjoint and complete";
  EXPECT_EQ(*all.rbegin(), 19);
  EXPECT_EQ(sampleShape(*dm->dataset(Split::kTrain)), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(dm->numClasses(), 10);

  auto same = mnist("val_split: 5, seed: 3");
  same->setup(Stage::kFit);
  EXPECT_EQ(ids(*same->dataset(Split::kVal)), val) << "same seed, same split";
  auto other = mnist("val_split: 5, seed: 4");
  other->setup(Stage::kFit);
  EXPECT_NE(ids(*other->dataset(Split::kVal)), val) << "another seed, another split";
}

TEST_F(SmallIdxFiles, ValSplitIsACountOrAFraction) {
  write(20, 7);
  for (const auto& [spec, expected] : std::vector<std::pair<std::string, std::int64_t>>{
           {"0", 0}, {"19", 19}, {"0.25", 5}, {"0.33", 6}, {"1.0e-1", 2}}) {
    SCOPED_TRACE("val_split " + spec);
    auto dm = mnist("val_split: " + spec);
    dm->setup(Stage::kValidate);
    EXPECT_EQ(dm->dataset(Split::kVal)->size(), expected);
    EXPECT_EQ(dm->dataset(Split::kTrain)->size(), 20 - expected);
  }
  EXPECT_EQ(errorOf<DataError>([&] { mnist("val_split: 20")->setup(Stage::kFit); }),
            "data.init_args.val_split: 20 validation samples leave none of the 20 MNIST training samples");
}

TEST_F(SmallIdxFiles, TestAndPredictUseTheTestFilesAndBatchingFollowsTheSplit) {
  write(20, 7);
  auto dm = mnist("batch_size: 4, drop_last: true, num_workers: 2, seed: 9");
  EXPECT_EQ(dm->dataset(Split::kTest), nullptr) << "nothing before setup";
  dm->setup(Stage::kTest);
  ASSERT_NE(dm->dataset(Split::kTest), nullptr);
  EXPECT_EQ(ids(*dm->dataset(Split::kTest)), (std::vector<int>{0, 1, 2, 3, 4, 5, 6})) << "in file order";
  EXPECT_EQ(dm->dataset(Split::kPredict), dm->dataset(Split::kTest));
  EXPECT_EQ(dm->dataset(Split::kTrain), nullptr) << "test does not load the training files";

  const LoaderOptions train = dm->loaderOptions(Split::kTrain), val = dm->loaderOptions(Split::kVal);
  EXPECT_EQ(train.batch_size, 4);
  EXPECT_EQ(train.num_workers, 2);
  EXPECT_TRUE(train.sampler.shuffle);
  EXPECT_TRUE(train.drop_last);
  EXPECT_EQ(train.sampler.seed, 9u);
  EXPECT_FALSE(val.sampler.shuffle) << "only training data is shuffled";
  EXPECT_FALSE(val.drop_last);
}

TEST_F(SmallIdxFiles, MissingFilesNameBothCandidatesAndTheSetting) {
  const std::string d = dir.path().string();
  EXPECT_EQ(errorOf<DataError>([&] { mnist()->setup(Stage::kFit); }),
            "missing MNIST file: neither " + d + "/train-images-idx3-ubyte.gz nor " + d +
                "/train-images-idx3-ubyte exists (set data.init_args.data_dir)");
  EXPECT_EQ(errorOf<DataError>([&] {
              dataModule("FashionMNISTDataModule", "data_dir: '" + d + "'")->setup(Stage::kTest);
            }),
            "missing Fashion-MNIST file: neither " + d + "/t10k-images-idx3-ubyte.gz nor " + d +
                "/t10k-images-idx3-ubyte exists (set data.init_args.data_dir; Debian ships it in the "
                "dataset-fashion-mnist package)");
}

TEST_F(SmallIdxFiles, ImagesAndLabelsMustAgree) {
  std::vector<std::uint8_t> short_labels(19, 1);
  write(20, 7, short_labels);
  const std::string d = dir.path().string();
  EXPECT_EQ(errorOf<DataError>([&] { mnist()->setup(Stage::kFit); }),
            d + "/train-images-idx3-ubyte.gz has 20 images but " + d + "/train-labels-idx1-ubyte has 19 labels");

  std::vector<std::uint8_t> labels(20, 1);
  labels[3] = 12;
  write(20, 7, labels);
  EXPECT_EQ(errorOf<DataError>([&] { mnist()->setup(Stage::kFit); }),
            d + "/train-labels-idx1-ubyte: label 12 of sample 3 is not a class in 0..9");
}

TEST_F(SmallIdxFiles, ACorruptFileFailsWithItsPath) {
  write(20, 7);
  writeBytes(dir.file("t10k-images-idx3-ubyte"), idxBytes(1, {6}, {1, 2, 3, 4, 5, 6}));
  EXPECT_THAT(errorOf<DataError>([&] { mnist()->setup(Stage::kTest); }),
              HasSubstr("bad IDX magic 0x00000801 in " + dir.file("t10k-images-idx3-ubyte")));
}

// ------------------------------------------------------------------ the real Fashion-MNIST files

TEST(FashionMNIST, RealFilesSplitSizesLabelsAndNormalisation) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz") &&
      !std::filesystem::exists(dir + "/train-images-idx3-ubyte"))
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << dir << " (Debian package dataset-fashion-mnist)";
  auto dm = dataModule("FashionMNISTDataModule", "");  // the default data_dir
  dm->setup(Stage::kFit);
  dm->setup(Stage::kTest);
  const Dataset& train = *dm->dataset(Split::kTrain);
  const Dataset& val = *dm->dataset(Split::kVal);
  const Dataset& test = *dm->dataset(Split::kTest);
  EXPECT_EQ(train.size(), 55000);
  EXPECT_EQ(val.size(), 5000);
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(sampleShape(train), (std::vector<std::int64_t>{1, 28, 28}));

  // Every class has 6000 training and 1000 test images.
  std::vector<int> train_counts(10), test_counts(10);
  double sum = 0, sq = 0;
  std::int64_t n = 0;
  for (const Dataset* d : {&train, &val, &test}) {
    for (std::int64_t begin = 0; begin < d->size(); begin += 5000) {
      std::vector<std::int64_t> idx(static_cast<std::size_t>(std::min<std::int64_t>(5000, d->size() - begin)));
      std::iota(idx.begin(), idx.end(), begin);
      std::vector<float> x(idx.size() * 784);
      std::vector<std::int64_t> y(idx.size());
      const FieldBuffer out[] = {{x.data(), nullptr}, {nullptr, y.data()}};
      d->fetch(idx, out);
      for (std::int64_t label : y) {
        ASSERT_TRUE(label >= 0 && label < 10) << label;
        ++(d == &test ? test_counts : train_counts)[static_cast<std::size_t>(label)];
      }
      if (d != &train) continue;
      for (float v : x) {
        sum += v;
        sq += static_cast<double>(v) * v;
      }
      n += static_cast<std::int64_t>(x.size());
    }
  }
  EXPECT_EQ(train_counts, std::vector<int>(10, 6000));
  EXPECT_EQ(test_counts, std::vector<int>(10, 1000));
  // Normalised with the training set's pixel mean and std: ~0 and ~1 on the
  // 55000 kept for training.
  const double mean = sum / static_cast<double>(n), stdev = std::sqrt(sq / static_cast<double>(n) - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(stdev, 1.0, 0.005);
}

// ------------------------------------------------------------------ CSV

class CsvFiles : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const std::string p = dir.file(name);
    writeBytes(p, text);
    return p;
  }
  std::unique_ptr<DataModule> csv(const std::string& init_args) { return dataModule("CSVDataModule", init_args); }
  std::string setupError(const std::string& init_args, Stage stage = Stage::kFit) {
    return errorOf<DataError>([&] { csv(init_args)->setup(stage); });
  }
  TempDir dir;
};

TEST_F(CsvFiles, ReadsFeaturesAndALabelColumnAnywhere) {
  const std::string train = write("train.csv", "a,label,b\r\n1.5,0,2\r\n\r\n-1,2,0.5\r\n3,1,-4e1\r\n");
  const std::string val = write("val.csv", "a,label,b\n7,1,8\n");
  auto dm = csv("train_file: '" + train + "', val_file: '" + val + "', standardize: false");
  dm->setup(Stage::kFit);
  const Samples t = fetchAll(*dm->dataset(Split::kTrain));
  EXPECT_EQ(t.x, (std::vector<float>{1.5f, 2.0f, -1.0f, 0.5f, 3.0f, -40.0f})) << "blank lines and CR skipped";
  EXPECT_EQ(t.y, (std::vector<std::int64_t>{0, 2, 1}));
  EXPECT_EQ(sampleShape(*dm->dataset(Split::kTrain)), (std::vector<std::int64_t>{2}));
  const Samples v = fetchAll(*dm->dataset(Split::kVal));
  EXPECT_EQ(v.x, (std::vector<float>{7.0f, 8.0f}));
  EXPECT_EQ(v.y, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(dm->numClasses(), 3);
}

TEST_F(CsvFiles, WithoutHeaderTheLabelIsTheLastColumnAndOtherDelimitersWork) {
  const std::string train = write("train.csv", "1;2;0\n3;4;1\n5;6;1\n");
  auto dm = csv("train_file: '" + train + "', val_file: '" + train + "', header: false, delimiter: ';', standardize: false");
  dm->setup(Stage::kFit);
  const Samples t = fetchAll(*dm->dataset(Split::kTrain));
  EXPECT_EQ(t.x, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(t.y, (std::vector<std::int64_t>{0, 1, 1}));
}

TEST_F(CsvFiles, StandardisesWithTrainingStatistics) {
  const std::string train = write("train.csv", "x,label\n1,0\n2,1\n3,0\n6,1\n");
  const std::string test = write("test.csv", "x,label\n4,1\n");
  auto dm = csv("train_file: '" + train + "', val_file: '" + train + "', test_file: '" + test + "'");
  dm->setup(Stage::kFit);
  dm->setup(Stage::kTest);
  // mean 3, population variance (4 + 1 + 0 + 9) / 4 = 3.5.
  const double sd = std::sqrt(3.5);
  const Samples t = fetchAll(*dm->dataset(Split::kTrain));
  for (std::size_t i = 0; i < 4; ++i) EXPECT_NEAR(t.x[i], (std::vector<double>{1, 2, 3, 6}[i] - 3) / sd, 1e-6);
  EXPECT_NEAR(fetchAll(*dm->dataset(Split::kTest)).x[0], (4 - 3) / sd, 1e-6);
}

TEST_F(CsvFiles, TestBeforeFitStandardisesWithTheTrainFile) {
  const std::string train = write("train.csv", "x,label\n1,0\n2,1\n3,0\n6,1\n");
  const std::string test = write("test.csv", "x,label\n4,1\n");
  auto dm = csv("train_file: '" + train + "', test_file: '" + test + "'");
  dm->setup(Stage::kTest);
  EXPECT_NEAR(fetchAll(*dm->dataset(Split::kTest)).x[0], 1 / std::sqrt(3.5), 1e-6);
}

TEST_F(CsvFiles, ValidationIsCarvedFromTrainWhenNoFileIsGiven) {
  std::string text = "f,label\n";
  for (int i = 0; i < 10; ++i) text += std::to_string(i) + "," + std::to_string(i % 3) + "\n";
  auto dm = csv("train_file: '" + write("train.csv", text) + "', val_split: 0.3, standardize: false");
  dm->setup(Stage::kFit);
  const Samples t = fetchAll(*dm->dataset(Split::kTrain)), v = fetchAll(*dm->dataset(Split::kVal));
  EXPECT_EQ(v.x.size(), 3u);
  std::multiset<float> all(t.x.begin(), t.x.end());
  all.insert(v.x.begin(), v.x.end());
  EXPECT_EQ(all, (std::multiset<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  for (std::size_t i = 0; i < v.x.size(); ++i) EXPECT_EQ(v.y[i], static_cast<std::int64_t>(v.x[i]) % 3);
}

TEST_F(CsvFiles, PredictNeedsNoLabels) {
  const std::string train = write("train.csv", "a,b,label\n1,2,0\n3,4,1\n");
  const std::string predict = write("predict.csv", "a,b\n5,6\n");
  auto dm = csv("train_file: '" + train + "', predict_file: '" + predict + "', standardize: false");
  dm->setup(Stage::kPredict);
  const auto& d = *dm->dataset(Split::kPredict);
  EXPECT_FALSE(labelled(d));
  EXPECT_EQ(fetchAll(d).x, (std::vector<float>{5, 6}));
}

TEST_F(CsvFiles, ANonNumericCellNamesFileLineAndColumn) {
  const std::string p = write("t.csv", "a,label,b\n1,0,2\n3,1,abc\n");
  EXPECT_EQ(setupError("train_file: '" + p + "'"), p + ":3: column 'b': expected a finite number, got 'abc'");
  const std::string q = write("q.csv", "1,2,0\n3,x,1\n");
  EXPECT_EQ(setupError("train_file: '" + q + "', header: false"), q + ":2: column 2: expected a finite number, got 'x'");
  const std::string nan = write("nan.csv", "a,label\nnan,1\n");
  EXPECT_EQ(setupError("train_file: '" + nan + "'"), nan + ":2: column 'a': expected a finite number, got 'nan'");
  const std::string empty_cell = write("e.csv", "a,label\n,1\n");
  EXPECT_EQ(setupError("train_file: '" + empty_cell + "'"),
            empty_cell + ":2: column 'a': expected a finite number, got ''");
}

TEST_F(CsvFiles, AWrongFieldCountNamesTheLine) {
  const std::string p = write("t.csv", "a,label,b\n1,0,2\n3,1,4\n5,6\n");
  EXPECT_EQ(setupError("train_file: '" + p + "'"), p + ":4: 2 fields, expected 3");
  const std::string trailing = write("tr.csv", "a,label\n1,0,\n");
  EXPECT_EQ(setupError("train_file: '" + trailing + "'"), trailing + ":2: 3 fields, expected 2");
  const std::string q = write("q.csv", "1,2,0\n3,1\n");
  EXPECT_EQ(setupError("train_file: '" + q + "', header: false"), q + ":2: 2 fields, expected 3");
}

TEST_F(CsvFiles, AMissingLabelColumnNamesTheSetting) {
  const std::string p = write("t.csv", "a,b,target\n1,2,0\n");
  EXPECT_EQ(setupError("train_file: '" + p + "'"),
            p + ": no column named 'label' in the header (set data.init_args.label_column)");
  auto dm = csv("train_file: '" + p + "', label_column: target, val_file: '" + p + "'");
  dm->setup(Stage::kFit);
  EXPECT_EQ(fetchAll(*dm->dataset(Split::kVal)).y, (std::vector<std::int64_t>{0}));
}

TEST_F(CsvFiles, ALabelMustBeANonNegativeInteger) {
  for (const char* bad : {"1.5", "-1"}) {
    const std::string p = write("t.csv", std::string("a,label\n1,") + bad + "\n");
    EXPECT_EQ(setupError("train_file: '" + p + "'"),
              p + ":2: label column 'label': expected a class index 0, 1, 2 ..., got '" + bad + "'");
  }
}

TEST_F(CsvFiles, MissingEmptyAndMismatchedFiles) {
  const std::string absent = dir.file("absent.csv");
  EXPECT_EQ(setupError("train_file: '" + absent + "'"), "cannot open CSV file " + absent + ": No such file or directory");
  const std::string empty = write("empty.csv", "");
  EXPECT_EQ(setupError("train_file: '" + empty + "'"), empty + " is empty: expected a header line");
  const std::string header_only = write("h.csv", "a,label\n");
  EXPECT_EQ(setupError("train_file: '" + header_only + "'"), header_only + " has no data rows");
  const std::string train = write("train.csv", "a,b,label\n1,2,0\n");
  const std::string test = write("test.csv", "a,label\n1,0\n");
  EXPECT_EQ(setupError("train_file: '" + train + "', test_file: '" + test + "'", Stage::kTest),
            test + " has 1 feature columns; the training file has 2");
  EXPECT_EQ(setupError(""), "data.init_args.train_file is not set: the CSV data module needs one to fit");
  EXPECT_EQ(setupError("train_file: '" + train + "'", Stage::kTest),
            "data.init_args.test_file is not set: the CSV data module needs one to test");
  EXPECT_THAT(errorOf<ConfigError>([&] { csv("delimiter: ';;'"); }),
              HasSubstr("data.init_args.delimiter: expected one character, got ';;'"));
}

// ------------------------------------------------------------------ Random

TEST(RandomDataModule, SeededGaussianSamplesWithoutLabels) {
  auto dm = dataModule("RandomDataModule", "size: 5, length: 7, seed: 3");
  dm->setup(Stage::kFit);
  const auto d = dm->dataset(Split::kTrain);
  EXPECT_EQ(d->size(), 7);
  EXPECT_EQ(sampleShape(*d), (std::vector<std::int64_t>{5}));
  EXPECT_FALSE(labelled(*d));
  for (Split s : {Split::kVal, Split::kTest, Split::kPredict}) EXPECT_EQ(dm->dataset(s), d);
  const Samples a = fetchAll(*d);
  Generator g(3, RandomStream::kData);
  for (float v : a.x) ASSERT_EQ(v, g.normal()) << "the kData stream of the seed, in sample order";

  auto again = dataModule("RandomDataModule", "size: 5, length: 7, seed: 3");
  again->setup(Stage::kTest);
  EXPECT_EQ(fetchAll(*again->dataset(Split::kTest)).x, a.x);
  auto other = dataModule("RandomDataModule", "size: 5, length: 7, seed: 4");
  other->setup(Stage::kTest);
  EXPECT_NE(fetchAll(*other->dataset(Split::kTest)).x, a.x);
}

}  // namespace
}  // namespace hpu::core::data
