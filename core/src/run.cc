#include "hpu/core/run.h"

#include <random>

#include "hpu/core/config/params.h"
#include "hpu/core/errors.h"

namespace hpu::core {

void resolveSeed(config::Node& cfg) {
  config::Node* seed = cfg.find("seed_everything");
  if (seed == nullptr || !seed->isScalar() || seed->str() != "true") return;
  std::random_device rd;
  const std::uint32_t value = rd();
  *seed = config::Node::scalar(std::to_string(value), seed->loc());
}

int run(const RunRequest& request) {
  throw Error("the " + request.subcommand + " pipeline is not assembled in this build");
}

std::string describeDevices(const std::map<std::string, std::string>&) { return ""; }

}  // namespace hpu::core
