// SLURM host lists ("node[01-04,07],gpu-a[1-2]-x[3-4],login1").
// Thread-safety: pure function.
#pragma once

#include <string>
#include <string_view>

namespace hpu::comm {

// The first host named by a SLURM host list: "node[01-04,07],login1" ->
// "node01" (zero padding kept), "rack[2-3]-n[5-6]" -> "rack2-n5".
// Throws EnvError (naming `variable`) when the list is empty or malformed.
std::string firstHostOfNodeList(std::string_view nodeList, std::string_view variable = "SLURM_JOB_NODELIST");

}  // namespace hpu::comm
