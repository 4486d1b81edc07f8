// A CollectiveObserver that keeps every record it is told of, for tests to
// inspect once the collectives ran.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "hpu/comm/collective_observer.h"

namespace hpu::comm::test_support {

class RecordingObserver final : public CollectiveObserver {
 public:
  void onCollective(const CollectiveRecord& record) override {
    std::lock_guard lock(mutex_);
    records_.push_back(record);
  }
  std::vector<CollectiveRecord> records() const {
    std::lock_guard lock(mutex_);
    return records_;
  }
  std::vector<std::string> descriptions() const {
    std::vector<std::string> out;
    for (const auto& record : records()) out.push_back(record.description);
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<CollectiveRecord> records_;
};

}  // namespace hpu::comm::test_support
