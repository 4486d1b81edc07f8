// Writes the fuzz targets' seed corpora under OUT/<target>/, from the
// project's configs and tests and from the encoders of each format:
//   config           every YAML file of configs/, examples/ and tests/, and
//                    every raw-string YAML config in the tests' sources, each
//                    alone and with command-line overrides
//   control_message  one message of every type, as encode() writes it
//   shm_lane         a lane slot holding an allreduce chunk, and a barrier
//   safetensors      checkpoints as the Trainer writes them (every dtype,
//                    metadata), and the committed checkpoint fixtures
//   chat_template    the models' chat templates and the engine's test
//                    templates of tests/instruct/fixtures
//
//   fuzz_seeds OUT
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/descriptor.h"
#include <nlohmann/json.hpp>

#include "hpu/core/checkpoint/checkpoint.h"
#include "sample_messages.h"
#include "wire/control_messages.h"

namespace fs = std::filesystem;
using namespace hpu::comm;
using namespace hpu::comm::detail;

namespace {

std::string readAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class Corpus {
 public:
  Corpus(const fs::path& root, const std::string& target) : dir_(root / target) { fs::create_directories(dir_); }
  void add(const std::string& bytes) {
    std::ofstream(dir_ / ("seed-" + std::to_string(count_++)), std::ios::binary) << bytes;
  }
  int count() const { return count_; }

 private:
  fs::path dir_;
  int count_ = 0;
};

void configSeeds(Corpus& corpus) {
  const fs::path source = HPU_SOURCE_DIR;
  std::vector<std::string> configs;
  for (const char* dir : {"configs", "examples", "tests"})
    for (const auto& e : fs::recursive_directory_iterator(source / dir))
      if (e.path().extension() == ".yaml") configs.push_back(readAll(e.path()));
  // Configs written inline in the tests: R"(...)" literals with a top-level key.
  static const std::regex kRaw(R"re(R"\(((?:.|\n)*?)\)")re");
  static const std::regex kTopLevel(R"((^|\n)(trainer|model|data|optimizer|seed_everything):)");
  for (const auto& e : fs::recursive_directory_iterator(source / "tests")) {
    if (e.path().extension() != ".cc") continue;
    const std::string text = readAll(e.path());
    for (std::sregex_iterator m(text.begin(), text.end(), kRaw), end; m != end; ++m)
      if (std::regex_search((*m)[1].str(), kTopLevel)) configs.push_back((*m)[1].str());
  }
  // The command-line tokens after the YAML text, each behind a NUL.
  auto tokens = [](std::initializer_list<std::string> list) {
    std::string joined;
    for (const std::string& t : list) joined += '\0' + t;
    return joined;
  };
  const std::string overrides[] = {
      "",
      tokens({"--trainer.max_epochs=2", "--model.init_args.lr=0.5"}),
      tokens({"--trainer.callbacks+=EarlyStopping", "--trainer.callbacks.patience", "3"}),
      tokens({"--model", "MLPClassifier", "--trainer.devices=[0,1]", "--ckpt_path", "null"}),
  };
  for (const std::string& config : configs)
    for (const std::string& o : overrides) corpus.add(config + o);
}

void controlMessageSeeds(Corpus& corpus) {
  const JobToken::Key key{1, 2, 3};  // fuzz_control_message's
  const ControlMessage messages[] = {
      test_support::sampleHello(),
      Admitted{1, 2, 41, "node0", "node0/boot"},
      Welcome{test_support::samplePeerTable(), true},
      Reject{1, "rank 1 joined twice"},
      Heartbeat{"allreduce #7 (sum, float32, 1024 elements, ring)"},
      StoreRequest{StoreRequest::Op::kSet, 1, {"key"}, "value"},
      StoreRequest{StoreRequest::Op::kGet, 2, {"key"}, "", 0, 1000},
      StoreRequest{StoreRequest::Op::kAdd, 3, {"counter"}, "", 5},
      StoreRequest{StoreRequest::Op::kWait, 4, {"a", "b"}, "", 0, 1000},
      StoreReply{2, StoreReply::Status::kOk, "value"},
      StoreReply{3, StoreReply::Status::kTimeout, ""},
      PeerDown{2, PeerDownKind::kLost, "rank 2 lost"},
      PeersLeft{{1, 3}},
      Abort{"loss is NaN"},
      Goodbye{},
      Shutdown{},
  };
  for (const auto& m : messages) corpus.add(encode(m, key));
}

void shmLaneSeeds(Corpus& corpus) {
  auto slot = [](std::uint8_t which, const Header& header, const std::string& rest) {
    const std::string contents = std::string(reinterpret_cast<const char*>(header.data()), header.size()) + rest;
    std::string input(17, '\0');
    const std::uint32_t words[] = {0, 1, 0, static_cast<std::uint32_t>(contents.size())};
    std::memcpy(input.data(), words, sizeof words);
    input[16] = static_cast<char>(which);
    return input + contents;
  };
  CollectiveDescriptor allreduce;
  allreduce.count = 16;
  corpus.add(slot(0, encodeHeader(allreduce, 0), std::string(64, '\x01')));
  CollectiveDescriptor barrier;
  barrier.kind = CollectiveKind::kBarrier;
  barrier.dtype = DType::kByte;
  barrier.name = "epoch_end";
  corpus.add(slot(1, encodeHeader(barrier, 0), barrier.name));
}

void safetensorsSeeds(Corpus& corpus) {
  using hpu::core::checkpoint::Checkpoint;
  using hpu::core::checkpoint::TensorEntry;
  Checkpoint ckpt;
  ckpt.tensors.push_back(TensorEntry{"model.layer.weight", hpu::device::DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6}, {}});
  ckpt.tensors.push_back(TensorEntry{"model.layer.bias", hpu::device::DType::kBFloat16, {3}, {0.5f, -1.0f, 2.0f}, {}});
  ckpt.tensors.push_back(TensorEntry{"model.half", hpu::device::DType::kFloat16, {2}, {0.25f, 8.0f}, {}});
  ckpt.tensors.push_back(TensorEntry{"model.ids", hpu::device::DType::kInt64, {2}, {}, {7, -3}});
  ckpt.tensors.push_back(TensorEntry{"optimizer.exp_avg.0", hpu::device::DType::kFloat32, {0}, {}, {}});
  ckpt.metadata = {{"hpu_train.format", "1"}, {"epoch", "0"}, {"global_step", "20"}, {"batches_done", "20"},
                   {"optimizer", R"({"name":"Adam","lr":0.01,"step":20})"}};
  corpus.add(hpu::core::checkpoint::encodeSafetensors(ckpt));
  ckpt.tensors.resize(1);
  corpus.add(hpu::core::checkpoint::encodeSafetensors(ckpt));
  for (const auto& e : fs::recursive_directory_iterator(fs::path(HPU_SOURCE_DIR) / "tests"))
    if (e.path().extension() == ".ckpt") corpus.add(readAll(e.path()));
}

void chatTemplateSeeds(Corpus& corpus) {
  const fs::path fixtures = fs::path(HPU_SOURCE_DIR) / "tests" / "instruct" / "fixtures";
  const nlohmann::json templates = nlohmann::json::parse(readAll(fixtures / "chat_templates.json"));
  for (const auto& [name, spec] : templates.items()) corpus.add(spec["template"].get<std::string>());
  for (const char* file : {"random_templates.json", "random_expressions.json"}) {
    const nlohmann::json cases = nlohmann::json::parse(readAll(fixtures / file));
    for (const auto& c : cases["cases"]) corpus.add(c["template"].get<std::string>());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds OUT\n");
    return 2;
  }
  const fs::path out = argv[1];
  Corpus config(out, "config"), control(out, "control_message"), lane(out, "shm_lane"), safetensors(out, "safetensors"),
      chat(out, "chat_template");
  configSeeds(config);
  controlMessageSeeds(control);
  shmLaneSeeds(lane);
  safetensorsSeeds(safetensors);
  chatTemplateSeeds(chat);
  std::printf("seeds: %d config, %d control_message, %d shm_lane, %d safetensors, %d chat_template\n", config.count(),
              control.count(), lane.count(), safetensors.count(), chat.count());
  return 0;
}
