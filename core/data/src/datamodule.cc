#include "hpu/core/data/datamodule.h"

namespace hpu::core::data {

std::string_view splitName(Split s) {
  switch (s) {
    case Split::kTrain:
      return "train";
    case Split::kVal:
      return "val";
    case Split::kTest:
      return "test";
    case Split::kPredict:
      return "predict";
  }
  return "?";
}

}  // namespace hpu::core::data
