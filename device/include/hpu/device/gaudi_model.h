// A time model of one Gaudi generation, for `hpu-train estimate`: how long a
// matrix-engine (MME) product, a vector-engine (TPC) pass, a host transfer
// and a collective over the job's cards take. Every constant comes from a
// published figure or from physics, with its source beside it in
// gaudi_model.cc; assumptions() lists them all (with --verbose).
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <span>
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

enum class CollectiveKind { kAllreduce, kReduceScatter, kAllgather, kBroadcast, kAlltoall, kBarrier };

// An op's time at every efficiency 1, by resource: the matrix engine's
// cycles (`matrix` says for which kind of product), the vector engine's,
// HBM traffic at its peak, and the host side. An op's engines and HBM
// overlap within its kernel: it takes the longest of them, each divided by
// its efficiency (GaudiModel::seconds), plus its host-side transfers.
struct Work {
  enum class Matrix { kProduct, kAttention };
  double mme = 0;
  Matrix matrix = Matrix::kProduct;
  double tpc = 0, hbm = 0;
  double host_link = 0, host_memory = 0;
};

// The named efficiency parameters of the time model, per generation and
// software version: the fraction of its peak each resource sustains in real
// kernels, and the host's time per launched graph. Default-constructed:
// uncalibrated (the engines at their peaks, HBM at 0.9, 1 ms per graph, the
// physics model's own assumptions). calibrationFor() gives the values
// bench/estimate/calibrate.py fitted on Intel's published figures.
struct Calibration {
  double mme = 1;          // products on the matrix engine, of their dtype's peak
  double attention = 1;    // the fused attention kernel's products, of their dtype's peak
  double tpc = 1;          // vector-engine passes
  double hbm = 0.9;        // streaming HBM reads and writes
  double collective = 1;   // collectives' bandwidth on the NIC ports
  // Seconds a collective costs beyond its transfers for each peer it
  // synchronises with (collectivePeers: posting, doorbell and completion per
  // peer link), so a 2-card all-reduce pays it once and an 8-card one 7 times.
  double collective_overhead = 0;
  double host_per_graph = 1e-3;    // seconds of host time per launched graph (a step, a decode step)
  const char* source = "uncalibrated: the engines at their peaks (assumed HBM 0.9, 1 ms per graph)";
};
Calibration calibrationFor(Generation generation);

// A published run the calibration is validated on (bench/estimate/
// published.py) and its leave-one-out ratio: the estimate, under parameters
// fitted without it, over the published figure, as speed (above 1:
// optimistic).
struct ValidationRow {
  enum class Mode { kTraining, kInference, kLatency };
  Mode mode;
  std::int64_t tokens_in;   // sequence (training) or prompt length
  std::int64_t tokens_out;  // generated tokens (0 in training)
  std::int64_t batch;       // global batch in sequences (training) or prompts
  int cards;
  double loo_ratio;
};
std::span<const ValidationRow> validationRows(Generation generation);

// How far off an estimate of `run` (its loo_ratio ignored) may be: the
// lowest and highest leave-one-out ratio of the `k` validation rows of the
// same mode most like it (in log distance of lengths, batch and cards:
// validationDistance), widened by exp(w) on each side for the distance of
// the nearest of them, w = kUncertaintyBase + kUncertaintyPerDistance x
// distance; a mode the generation has no row of takes the other calibrated
// generation's rows, w + kUncertaintyOtherGeneration. The constants are
// the smallest with which at least 90% of the rows held out fall inside
// their range (tests/device/gaudi_model_test.cc: every row against the
// others' range, 46 of 51; every row against the other generation's, 37 of
// 40; the 36 software 1.19 runs no fit saw, 33, by
// bench/estimate/uncertainty_check.py). rows 0: neither generation has a
// row of that mode.
inline constexpr double kUncertaintyBase = 0.06;
inline constexpr double kUncertaintyPerDistance = 0.06;
inline constexpr double kUncertaintyOtherGeneration = 0.04;
struct Uncertainty {
  double low = 1, high = 1;            // widened
  double rows_low = 1, rows_high = 1;  // the rows' own ratios
  double widening = 1;                 // exp(w)
  int rows = 0;
  Generation from = Generation::kGaudi2;  // whose rows
  ValidationRow nearest{};                // the row most like `run`
};
double validationDistance(const ValidationRow& a, const ValidationRow& b);
Uncertainty uncertaintyFor(Generation generation, const ValidationRow& run, std::size_t k = 4);
// uncertaintyFor with `run` itself (the same address) left out of the rows.
Uncertainty uncertaintyWithout(Generation generation, const ValidationRow& run, Generation rows_of,
                               std::size_t k = 4);

class GaudiModel {
 public:
  // The generation's calibrated model (calibrationFor).
  GaudiModel(Generation generation, JobTopology topology);
  GaudiModel(Generation generation, JobTopology topology, const Calibration& calibration);
  const Calibration& calibration() const { return calibration_; }

  // The time of `work` under this model's calibration, and which efficiency
  // bounds it: the longest of its engines and HBM plus its host side.
  enum class Bound { kMme, kAttention, kTpc, kHbm, kNone };
  struct Priced {
    double engines = 0;  // the bounding engine's (or HBM's) time
    double host = 0;     // host link and host memory, outside the kernel
    Bound bound = Bound::kNone;  // kNone: no engine or HBM work
    double seconds() const { return engines + host; }
  };
  Priced price(const Work& work) const;
  double seconds(const Work& work) const { return price(work).seconds(); }
  // The work of a product (matrixSeconds) and of a vector pass (vectorSeconds).
  Work matrixWork(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, DType dtype,
                  DType out_dtype) const;
  Work vectorWork(double bytes, double elements, double vector_instructions, DType dtype) const;

  const DeviceSpec& spec() const { return spec_; }
  const JobTopology& topology() const { return topology_; }

  // `batch` independent products [m, k] x [k, n] with operands of `dtype`
  // and an output of `out_dtype` on the MME: tiles of the output on the
  // engines' arrays in the geometry that finishes first, each K steps plus
  // the array's fill, or the HBM traffic of the operands, whichever is
  // longer.
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
  // The peers one rank of that group exchanges with: the group's other cards
  // in its server (direct), and its ring neighbours across servers (one of
  // two nodes, else two).
  int collectivePeers(int group_size = 0, int group_nodes = 0) const;
  // The host's part of one launched graph (a step's mark_step).
  double hostSecondsPerGraph() const;

  std::vector<Assumption> assumptions() const;

 private:
  // A collective's group: its ranks, its nodes, and its ranks per node (at
  // most a server's cards); (0, 0): all ranks of the job.
  struct Group {
    int size, nodes, per_node;
  };
  Group group(int group_size, int group_nodes) const;

  const DeviceSpec& spec_;
  JobTopology topology_;
  struct Engines {
    int mmes;           // matrix engines
    int mmeSide;        // each a mmeSide x mmeSide MAC array
    bool mmeReshapes;   // ... that also runs as side/2 x 2side and 2side x side/2
    int tpcs;           // vector cores
    double pcieGBps;    // host link, per direction
    int scaleUpPorts;   // NIC ports wired all-to-all inside a server
    int scaleOutPorts;  // NIC ports to the other servers
  } engines_;
  double clockHz_;  // from the published bf16 peak and the MME geometry
  Calibration calibration_;
};

}  // namespace hpu::device
