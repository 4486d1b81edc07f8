// Where a Lightning-style logger writes: <save_dir>/<name>/version_<N>, from
// the init_args save_dir, name and version every such logger declares
// (logDirectoryParams()). A null version is the next free version_N, picked
// by global rank 0 and broadcast; loggers that resolve before either writes
// (the default TensorBoardLogger + CSVLogger) land in the same folder.
// Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "hpu/core/config/params.h"
#include "hpu/core/config/schema.h"

namespace hpu::core {

class Strategy;

class LogDirectory {
 public:
  explicit LogDirectory(const config::Params& p);
  // save_dir defaults to `default_root_dir`; a null version becomes the next
  // version_N under <save_dir>/<name>, or with `continue_run` (an elastic
  // restart) the newest existing one. Every rank takes part.
  void resolve(const std::string& default_root_dir, Strategy& strategy, bool continue_run);
  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const std::string& saveDir() const { return save_dir_; }
  // <save_dir>/<name>/version_<N> (or /<version> for a string version).
  std::string path() const;

 private:
  std::string save_dir_, name_, version_;
  bool version_is_int_;
};

// The init_args save_dir, name and version, documented for `what` ("metrics.csv").
std::vector<config::ParamSpec> logDirectoryParams();

}  // namespace hpu::core
