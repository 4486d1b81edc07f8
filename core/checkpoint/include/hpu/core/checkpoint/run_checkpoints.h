// `last` and `best`: the words ckpt_path takes, as Lightning's does, for a
// checkpoint of a run rather than a file. One resolver serves every
// subcommand that takes --ckpt_path: the Trainer's stages (fit, validate,
// test, predict, export with a config) and the commands that build no Trainer
// (export from the checkpoint's own config, consolidate). Reads the file
// system only; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hpu::core::checkpoint {

// "last" or "best".
bool isRunCheckpointWord(std::string_view ckpt_path);

// Where a run's checkpoints are looked for.
struct RunCheckpointSearch {
  // Checkpoint folders of the run that asks, in order: a ModelCheckpoint's
  // dirpath, <log_dir>/checkpoints.
  std::vector<std::string> dirs;
  // The logger's folder of runs (./lightning_logs): its version_N folders are
  // the earlier runs.
  std::string runs_root;
  // best_model_path of a ModelCheckpoint of this process ("" when none).
  std::string best_known;
};

struct RunCheckpoint {
  enum class Outcome {
    kFound,           // path
    kNoLast,          // no last.ckpt under looked_in
    kNoRecordedBest,  // best: the ModelCheckpoint state of looked_in (a last.ckpt) records none
  };
  Outcome outcome = Outcome::kFound;
  std::string path;  // kFound: the checkpoint, else ""
  std::string how;   // kFound: why this one, for the line that names it ("the newest run's last.ckpt")
  // Else, for the message: the folder last.ckpt was looked for under
  // ("./lightning_logs"), or the last.ckpt that records no best.
  std::string looked_in;
};

// last: the last.ckpt of the first of `dirs` holding one, else that of the
// newest version_N under runs_root holding one (ModelCheckpoint's save_last
// writes it; as in Lightning, no other file is `last`).
// best: `best_known`; else the best_model_path the ModelCheckpoint state of
// that last.ckpt records. The outcome says why there is none.
// REQUIRES: isRunCheckpointWord(word).
RunCheckpoint findRunCheckpoint(std::string_view word, const RunCheckpointSearch& search);

}  // namespace hpu::core::checkpoint
