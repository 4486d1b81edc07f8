// A time model of one Gaudi generation, for `hpu-train estimate`: how long a
// matrix-engine (MME) product, a vector-engine (TPC) pass, a host transfer
// and a collective over the job's cards take. Every constant comes from a
// published figure or from physics, with its source beside it in
// gaudi_model.cc; assumptions() lists them all (with --verbose).
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hpu/device/spec.h"

namespace hpu::device {

// One named constant of the model: its value, unit and where it comes from.
struct Assumption {
  std::string name;
  double value;
  std::string unit;
  std::string source;
};

// Where the job's cards sit: devices per node (one HLS server: up to 8
// cards wired all-to-all) and nodes.
struct JobTopology {
  int devicesPerNode = 1;
  int numNodes = 1;
  int worldSize() const { return devicesPerNode * numNodes; }
};

enum class CollectiveKind { kAllreduce, kReduceScatter, kAllgather, kBroadcast, kBarrier };

class GaudiModel {
 public:
  GaudiModel(Generation generation, JobTopology topology);

  const DeviceSpec& spec() const { return spec_; }
  const JobTopology& topology() const { return topology_; }

  // `batch` independent products [m, k] x [k, n] with operands of `dtype`
  // and an output of `out_dtype` on the MME: tiles of the output on the
  // engines' arrays, each K steps plus the array's fill, or the HBM traffic
  // of the operands, whichever is longer.
  double matrixSeconds(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, DType dtype,
                       DType out_dtype) const;
  // The MME's peak for dtype, in FLOP/s (fp32 and fp16 as noted in the .cc).
  double matrixPeakFlops(DType dtype) const;
  // A TPC pass that reads and writes `bytes` of HBM and runs
  // `vector_instructions` per element over `elements` elements of `dtype`.
  double vectorSeconds(double bytes, double elements, double vector_instructions, DType dtype) const;
  // Bytes over the host link (PCIe), one direction.
  double hostLinkSeconds(double bytes) const;
  // A host-side pass over `bytes` of host memory (an offloaded optimizer step).
  double hostMemorySeconds(double bytes) const;
  // A collective on a buffer of `bytes` (the whole buffer: a
  // reduce-scatter's input, an allgather's output) over a group of
  // `group_size` ranks on `group_nodes` nodes, each node holding as many
  // (0, 0: all ranks of the job): hierarchical when the group spans nodes.
  double collectiveSeconds(CollectiveKind kind, double bytes, int group_size = 0, int group_nodes = 0) const;
  // The host's part of one launched graph (a step's mark_step).
  double hostSecondsPerGraph() const;

  std::vector<Assumption> assumptions() const;

 private:
  const DeviceSpec& spec_;
  JobTopology topology_;
  struct Engines {
    int mmes;           // matrix engines
    int mmeSide;        // each a mmeSide x mmeSide MAC array
    int tpcs;           // vector cores
    double pcieGBps;    // host link, per direction
    int scaleUpPorts;   // NIC ports wired all-to-all inside a server
    int scaleOutPorts;  // NIC ports to the other servers
  } engines_;
  double clockHz_;  // from the published bf16 peak and the MME geometry
};

}  // namespace hpu::device
