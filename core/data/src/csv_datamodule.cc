// CSVDataModule: numeric features and an integer class column from CSV files.
#include <spdlog/fmt/fmt.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "batching.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"

namespace hpu::core::data {
namespace {

using config::Params;
using config::Type;

// Features and an integer label column from CSV files.
class CSVDataModule : public DataModule {
 public:
  explicit CSVDataModule(const Params& p)
      : files_{p.has("train_file") ? p.getString("train_file") : "", p.has("val_file") ? p.getString("val_file") : "",
               p.has("test_file") ? p.getString("test_file") : "",
               p.has("predict_file") ? p.getString("predict_file") : ""},
        label_column_(p.getString("label_column")),
        header_(p.getBool("header")),
        delimiter_(p.getString("delimiter")),
        val_split_(p.getFloat("val_split")),
        standardize_(p.getBool("standardize")),
        batching_(p) {
    if (delimiter_.size() != 1) p.fail("delimiter", "expected one character, got '" + delimiter_ + "'");
  }

  void setup(Stage stage) override {
    const bool fit = stage == Stage::kFit || stage == Stage::kValidate;
    if (fit && !train_) {
      if (files_[0].empty())
        throw DataError("data.init_args.train_file is not set: the CSV data module needs one to fit");
      auto table = read(files_[0], true);
      fitStandardizer(*table);
      std::shared_ptr<const Dataset> full = transform(std::move(table));
      if (!files_[1].empty()) {
        train_ = full;
        val_ = transform(read(files_[1], true));
      } else {
        const auto n_val = static_cast<std::int64_t>(std::floor(val_split_ * static_cast<double>(full->size())));
        std::tie(train_, val_) = randomSplit(full, n_val, batching_.seed);
      }
    }
    if (stage == Stage::kTest && !test_) {
      if (files_[2].empty())
        throw DataError("data.init_args.test_file is not set: the CSV data module needs one to test");
      ensureStandardizer();
      test_ = transform(read(files_[2], true));
    }
    if (stage == Stage::kPredict && !predict_) {
      const std::string& f = files_[3].empty() ? files_[2] : files_[3];
      if (f.empty()) throw DataError("data.init_args.predict_file (or test_file) is not set: nothing to predict on");
      ensureStandardizer();
      predict_ = transform(read(f, false));
    }
  }

  std::shared_ptr<const Dataset> dataset(Split split) const override {
    switch (split) {
      case Split::kTrain:
        return train_;
      case Split::kVal:
        return val_;
      case Split::kTest:
        return test_;
      case Split::kPredict:
        return predict_;
    }
    return nullptr;
  }
  LoaderOptions loaderOptions(Split split) const override { return batching_.options(split); }
  std::int64_t* batchSizeArg(std::string_view arg_name) override { return batching_.batchSizeArg(arg_name); }
  std::int64_t numClasses() const override { return num_classes_; }
  std::string name() const override { return "CSVDataModule"; }

 private:
  struct Table {
    std::vector<float> x;
    std::vector<std::int64_t> y;
    std::int64_t cols = 0;
    std::int64_t size() const { return cols == 0 ? 0 : static_cast<std::int64_t>(x.size()) / cols; }
  };

  // Reads `path`; with `labelled`, the label column must be present.
  std::shared_ptr<Table> read(const std::string& path, bool labelled) {
    std::ifstream in(path);
    if (!in) throw DataError(fmt::format("cannot open CSV file {}: {}", path, std::strerror(errno)));
    auto t = std::make_shared<Table>();
    std::string line;
    std::vector<std::string> names;
    std::int64_t label_idx = -1;
    std::int64_t line_no = 0;
    auto split = [&](const std::string& l) {
      std::vector<std::string> cells;
      std::string cell;
      std::istringstream ss(l);
      while (std::getline(ss, cell, delimiter_[0])) cells.push_back(cell);
      if (!l.empty() && l.back() == delimiter_[0]) cells.emplace_back();
      return cells;
    };
    if (header_) {
      if (!std::getline(in, line)) throw DataError(fmt::format("{} is empty: expected a header line", path));
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      names = split(line);
      for (std::size_t i = 0; i < names.size(); ++i)
        if (names[i] == label_column_) label_idx = static_cast<std::int64_t>(i);
      if (label_idx < 0 && labelled)
        throw DataError(fmt::format("{}: no column named '{}' in the header (set data.init_args.label_column)", path,
                                    label_column_));
    } else {
      label_idx = labelled ? -2 : -1;  // -2: the last column
    }
    while (std::getline(in, line)) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      auto cells = split(line);
      if (label_idx == -2) label_idx = static_cast<std::int64_t>(cells.size()) - 1;
      const std::size_t expected = header_ ? names.size() : (t->cols + (label_idx >= 0 ? 1 : 0));
      if (t->cols != 0 || header_) {
        if (cells.size() != expected)
          throw DataError(fmt::format("{}:{}: {} fields, expected {}", path, line_no, cells.size(), expected));
      }
      std::int64_t features = 0;
      for (std::size_t i = 0; i < cells.size(); ++i) {
        char* end = nullptr;
        const double v = std::strtod(cells[i].c_str(), &end);
        const std::string col = header_ ? "'" + names[i] + "'" : std::to_string(i + 1);
        if (cells[i].empty() || *end != '\0' || !std::isfinite(v))
          throw DataError(
              fmt::format("{}:{}: column {}: expected a finite number, got '{}'", path, line_no, col, cells[i]));
        if (static_cast<std::int64_t>(i) == label_idx) {
          if (v < 0 || v != std::floor(v))
            throw DataError(fmt::format("{}:{}: label column {}: expected a class index 0, 1, 2 ..., got '{}'", path,
                                        line_no, col, cells[i]));
          t->y.push_back(static_cast<std::int64_t>(v));
        } else {
          t->x.push_back(static_cast<float>(v));
          ++features;
        }
      }
      if (t->cols == 0) t->cols = features;
    }
    if (t->size() == 0) throw DataError(fmt::format("{} has no data rows", path));
    if (!labelled) t->y.clear();
    if (feature_count_ != 0 && t->cols != feature_count_)
      throw DataError(
          fmt::format("{} has {} feature columns; the training file has {}", path, t->cols, feature_count_));
    feature_count_ = t->cols;
    for (std::int64_t y : t->y) num_classes_ = std::max(num_classes_, y + 1);
    return t;
  }

  void fitStandardizer(const Table& t) {
    mean_.assign(static_cast<std::size_t>(t.cols), 0.0);
    inv_std_.assign(static_cast<std::size_t>(t.cols), 1.0);
    if (!standardize_) return;
    std::vector<double> sq(static_cast<std::size_t>(t.cols), 0.0);
    for (std::int64_t r = 0; r < t.size(); ++r)
      for (std::int64_t c = 0; c < t.cols; ++c) {
        const double v = t.x[static_cast<std::size_t>(r * t.cols + c)];
        mean_[static_cast<std::size_t>(c)] += v;
        sq[static_cast<std::size_t>(c)] += v * v;
      }
    const auto n = static_cast<double>(t.size());
    for (std::size_t c = 0; c < mean_.size(); ++c) {
      mean_[c] /= n;
      const double var = std::max(0.0, sq[c] / n - mean_[c] * mean_[c]);
      inv_std_[c] = var > 0 ? 1.0 / std::sqrt(var) : 1.0;
    }
  }

  // Standardisation needs training statistics; without a fit, use the train file's.
  void ensureStandardizer() {
    if (!mean_.empty() || !standardize_) return;
    if (files_[0].empty()) {
      standardize_ = false;
      return;
    }
    fitStandardizer(*read(files_[0], true));
  }

  std::shared_ptr<const Dataset> transform(std::shared_ptr<Table> t) const {
    if (standardize_ && !mean_.empty())
      for (std::int64_t r = 0; r < t->size(); ++r)
        for (std::int64_t c = 0; c < t->cols; ++c) {
          float& v = t->x[static_cast<std::size_t>(r * t->cols + c)];
          v = static_cast<float>((v - mean_[static_cast<std::size_t>(c)]) * inv_std_[static_cast<std::size_t>(c)]);
        }
    return std::make_shared<FloatDataset>(std::vector<std::int64_t>{t->cols}, std::move(t->x), std::move(t->y));
  }

  std::string files_[4];
  std::string label_column_;
  bool header_;
  std::string delimiter_;
  double val_split_;
  bool standardize_;
  Batching batching_;
  std::int64_t feature_count_ = 0;
  std::int64_t num_classes_ = 0;
  std::vector<double> mean_, inv_std_;
  std::shared_ptr<const Dataset> train_, val_, test_, predict_;
};

HPU_REGISTER_COMPONENT(DataModule,
                       dataModuleSchema("CSVDataModule", "",
                                        {{"train_file", Type::optional(Type::path(config::PathKind::kFile)), "null",
                                          "CSV of training samples (also split for validation)."},
                                         {"val_file", Type::optional(Type::path(config::PathKind::kFile)), "null",
                                          "CSV of validation samples (default: carved from train)."},
                                         {"test_file", Type::optional(Type::path(config::PathKind::kFile)), "null", "CSV of test samples."},
                                         {"predict_file", Type::optional(Type::path(config::PathKind::kFile)), "null",
                                          "CSV to predict on (default: test_file); labels optional."},
                                         {"label_column", Type::string(), "label",
                                          "Header name of the integer class column (without header: the last)."},
                                         {"header", Type::boolean(), "true", "The first line names the columns."},
                                         {"delimiter", Type::string(), "','", "Field separator."},
                                         {"val_split", Type::real().min(0.0).max(1.0, true), "0.1",
                                          "Fraction of train held out when val_file is unset."},
                                         {"standardize", Type::boolean(), "true",
                                          "Scale features to zero mean, unit variance (training statistics)."}},
                                        "32", "Numeric features and an integer class column from CSV files."),
                       [](const Params& p) { return std::make_unique<CSVDataModule>(p); });

}  // namespace
}  // namespace hpu::core::data
