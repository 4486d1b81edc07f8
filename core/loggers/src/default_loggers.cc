#include "hpu/core/loggers/logger.h"

namespace hpu::core {

const std::vector<std::string>& defaultLoggerClasses() {
  static const std::vector<std::string> classes{"TensorBoardLogger", "CSVLogger"};
  return classes;
}

}  // namespace hpu::core
