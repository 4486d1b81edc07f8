// LambdaCallback: Lightning's LambdaCallback for C++ code. Each hook is a
// std::function, empty for nothing, so a program or a test adds behaviour
// to a run without writing a Callback subclass:
//
//   parts.callbacks.push_back(std::make_unique<LambdaCallback>(LambdaHooks{
//       .on_train_epoch_end = [](Trainer& t) { spdlog::info("epoch {} done", t.currentEpoch()); }}));
//
// The hooks are Lightning's (and Callback's); designated initializers name
// them in this order. A LambdaCallback keeps no checkpoint state. Not a
// config class: configs name callbacks that are registered.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "hpu/core/callbacks/callback.h"

namespace hpu::core {

struct LambdaHooks {
  using Hook = std::function<void(Trainer&)>;
  using BatchHook = std::function<void(Trainer&, std::int64_t batch_idx)>;
  std::function<void(Trainer&, data::Stage)> setup;
  Hook on_fit_start, on_fit_end;
  Hook on_sanity_check_start, on_sanity_check_end;
  Hook on_train_epoch_start, on_train_epoch_end;
  BatchHook on_train_batch_start, on_train_batch_end;
  Hook on_validation_start, on_validation_end;
  BatchHook on_validation_batch_start, on_validation_batch_end;
  Hook on_test_start, on_test_end;
  BatchHook on_test_batch_start, on_test_batch_end;
  Hook on_predict_start, on_predict_end;
  BatchHook on_predict_batch_start;
  std::function<void(Trainer&, const Prediction& outputs, std::int64_t batch_idx)> on_predict_batch_end;
  std::function<void(Trainer&, const std::exception& error)> on_exception;
};

class LambdaCallback final : public Callback {
 public:
  explicit LambdaCallback(LambdaHooks hooks) : h_(std::move(hooks)) {}
  std::string stateKey() const override { return "LambdaCallback"; }

  void setup(Trainer& t, data::Stage s) override { call(h_.setup, t, s); }
  void onFitStart(Trainer& t) override { call(h_.on_fit_start, t); }
  void onFitEnd(Trainer& t) override { call(h_.on_fit_end, t); }
  void onSanityCheckStart(Trainer& t) override { call(h_.on_sanity_check_start, t); }
  void onSanityCheckEnd(Trainer& t) override { call(h_.on_sanity_check_end, t); }
  void onTrainEpochStart(Trainer& t) override { call(h_.on_train_epoch_start, t); }
  void onTrainEpochEnd(Trainer& t) override { call(h_.on_train_epoch_end, t); }
  void onTrainBatchStart(Trainer& t, std::int64_t i) override { call(h_.on_train_batch_start, t, i); }
  void onTrainBatchEnd(Trainer& t, std::int64_t i) override { call(h_.on_train_batch_end, t, i); }
  void onValidationStart(Trainer& t) override { call(h_.on_validation_start, t); }
  void onValidationEnd(Trainer& t) override { call(h_.on_validation_end, t); }
  void onValidationBatchStart(Trainer& t, std::int64_t i) override { call(h_.on_validation_batch_start, t, i); }
  void onValidationBatchEnd(Trainer& t, std::int64_t i) override { call(h_.on_validation_batch_end, t, i); }
  void onTestStart(Trainer& t) override { call(h_.on_test_start, t); }
  void onTestEnd(Trainer& t) override { call(h_.on_test_end, t); }
  void onTestBatchStart(Trainer& t, std::int64_t i) override { call(h_.on_test_batch_start, t, i); }
  void onTestBatchEnd(Trainer& t, std::int64_t i) override { call(h_.on_test_batch_end, t, i); }
  void onPredictStart(Trainer& t) override { call(h_.on_predict_start, t); }
  void onPredictEnd(Trainer& t) override { call(h_.on_predict_end, t); }
  void onPredictBatchStart(Trainer& t, std::int64_t i) override { call(h_.on_predict_batch_start, t, i); }
  void onPredictBatchEnd(Trainer& t, const Prediction& p, std::int64_t i) override {
    call(h_.on_predict_batch_end, t, p, i);
  }
  void onException(Trainer& t, const std::exception& e) override { call(h_.on_exception, t, e); }

 private:
  template <class F, class... Args>
  static void call(const F& f, Args&&... args) {
    if (f) f(std::forward<Args>(args)...);
  }
  LambdaHooks h_;
};

}  // namespace hpu::core
