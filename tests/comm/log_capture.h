// Captures what comm/ logs through spdlog's default logger while in scope.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

namespace hpu::comm::test_support {

class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<Sink>()) { spdlog::default_logger()->sinks().push_back(sink_); }
  ~LogCapture() {
    auto& sinks = spdlog::default_logger()->sinks();
    std::erase(sinks, sink_);
  }

  // Every captured line containing `text`.
  std::vector<std::string> linesWith(const std::string& text) const {
    std::lock_guard lock(sink_->linesMutex);
    std::vector<std::string> out;
    for (const auto& line : sink_->lines) {
      if (line.find(text) != std::string::npos) out.push_back(line);
    }
    return out;
  }

  // Waits (at most `timeout`) until a line contains `text`.
  bool waitFor(const std::string& text, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!linesWith(text).empty()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  struct Sink : spdlog::sinks::base_sink<std::mutex> {
    void sink_it_(const spdlog::details::log_msg& msg) override {
      std::lock_guard lock(linesMutex);
      lines.emplace_back(msg.payload.data(), msg.payload.size());
    }
    void flush_() override {}
    mutable std::mutex linesMutex;
    std::vector<std::string> lines;
  };
  std::shared_ptr<Sink> sink_;
};

}  // namespace hpu::comm::test_support
