// Helpers shared by the core test suites: an emulated device, temporary
// directories and files, and building registered components from YAML.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hpu/core/config/normalize.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/yaml_io.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/base/random.h"
#include "hpu/core/module/lightning_module.h"
#include "hpu/core/tensor/tensor.h"
#include "hpu/env/environment.h"
#include "hpu/device/platform.h"

namespace hpu::core::testing {

// hpu:0 of a one-device emulated node in eager mode (no lazy graph grows
// across the many forwards of a finite-difference check).
inline device::Device& testDevice() {
  static device::Platform platform =
      device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}, {"PT_HPU_LAZY_MODE", "0"}});
  return platform.device(0);
}

// Float32 tensors on testDevice() from values / normal samples / int64 labels.
inline Tensor tensorOf(const Shape& shape, const std::vector<float>& values) {
  return Tensor::fromHost(testDevice(), shape, values);
}
inline Tensor randomTensor(const Shape& shape, Generator& g, float scale = 1.0f) {
  std::vector<float> v(static_cast<std::size_t>(shape.numel()));
  for (float& x : v) x = scale * g.normal();
  return tensorOf(shape, v);
}
inline Tensor labelsOf(const std::vector<std::int64_t>& labels) {
  return Tensor::fromHost(testDevice(), {static_cast<std::int64_t>(labels.size())}, labels);
}

// A fresh directory under the system temp dir, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hpu-core-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Names of the entries in this directory / in `dir`, sorted.
  std::vector<std::string> entries() const { return entriesOf(path_); }
  static std::vector<std::string> entriesOf(const std::filesystem::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::filesystem::path path_;
};

inline void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Builds a registered component of `kind` from YAML such as
// "class_path: CSVDataModule\ninit_args: {train_file: a.csv}", through the
// same validation path a config file takes.
template <class Base>
std::unique_ptr<Base> buildComponent(config::ComponentKind kind, const std::string& yaml, const std::string& path) {
  config::Node node = config::loadYamlString(yaml, "test.yaml");
  std::vector<std::string> problems;
  config::Node canonical = config::normalize(node, config::Type::component({kind}), path, problems);
  if (!problems.empty()) throw ConfigError(problems);
  return config::ComponentFactory<Base>::instance().create(canonical, path);
}

// The message of the core::Error `fn` throws ("" and a test failure if it
// throws nothing or something else).
template <class E = Error>
std::string errorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw another exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "threw nothing";
  return "";
}

// Pipeline stage `stage` of `stages` (a model that splits into stages).
struct PipelineStage {
  int stage = 0, stages = 1;
};

// A registered model (`class_name` with YAML `init_args`), validated as a
// config's would be, configured on `dev` with weights drawn from `seed`: the
// whole model, or a pipeline stage of it.
template <class M = LightningModule>
std::unique_ptr<M> configuredModel(const std::string& class_name, const std::string& init_args, std::uint64_t seed,
                                   device::Device& dev = testDevice(), PipelineStage part = {}) {
  auto model = buildComponent<LightningModule>(config::ComponentKind::kModel,
                                               "class_path: " + class_name + "\ninit_args: " + init_args, "model");
  // The model draws its dropout masks from `dropout` for as long as it lives:
  // the streams stay here for the test process's.
  static std::deque<Generator> dropout_streams;
  Generator init(seed);
  Generator& dropout = dropout_streams.emplace_back(seed + 1);
  nn::InitContext ctx{dev, init, dropout};
  ctx.pipeline_stage = part.stage;
  ctx.pipeline_stages = part.stages;
  model->configureModel(ctx, {});
  return std::unique_ptr<M>(static_cast<M*>(model.release()));
}

}  // namespace hpu::core::testing
