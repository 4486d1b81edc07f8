// Helpers of the instruct tests, which link only the data layer and the
// layers below it (tests/core/test_support.h reaches up to the module layer):
// a temporary directory, a registered component built from YAML, and the
// message of an expected exception.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "hpu/core/base/errors.h"
#include "hpu/core/config/normalize.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/yaml_io.h"

namespace hpu::core::testing {

// A fresh directory under the system temp dir, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hpu-instruct-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // Writes `content` to the file `name` in the directory; its path.
  std::string file(const std::string& name, const std::string& content) const {
    std::ofstream(path_ / name, std::ios::binary) << content;
    return (path_ / name).string();
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The component `yaml` describes (class_path, init_args), validated against
// its schema; ConfigError for what the schema refuses.
template <class Base>
std::unique_ptr<Base> buildComponent(config::ComponentKind kind, const std::string& yaml, const std::string& path) {
  const config::Node node = config::loadYamlString(yaml, "test.yaml");
  std::vector<std::string> problems;
  const config::Node canonical = config::normalize(node, config::Type::component({kind}), path, problems);
  if (!problems.empty()) throw ConfigError(problems);
  return config::ComponentFactory<Base>::instance().create(canonical, path);
}

// The what() of the E that `fn` throws ("" and a test failure if it throws
// nothing or something else).
template <class E = DataError, class Fn>
std::string errorOf(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "threw nothing";
  return "";
}

}  // namespace hpu::core::testing
