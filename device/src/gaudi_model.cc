#include "hpu/device/gaudi_model.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <span>
#include <utility>

#include "hpu/device/check.h"

namespace hpu::device {
namespace {

// Sources, beside spec.cc's [HC24], [G3WP], [G2WP], [G1WP]:
//  [G3WP]  Intel Gaudi 3 AI Accelerator White Paper (2024): 8 MMEs, each a
//          256x256 array of MACs; 64 TPCs with 256-byte SIMD; vector BF16
//          28.7 TFLOP/s; PCIe Gen5 x16; in a server 21 of the 24 200 GbE
//          ports connect the 8 cards all-to-all and 3 go to the scale-out
//          network.
//  [G2WP]  Habana Gaudi2 White Paper (2022): 2 MMEs, 24 TPCs (the same
//          256-byte SIMD), PCIe Gen4 x16; HLS-Gaudi2 server: 21 of the 24
//          100 GbE ports all-to-all between the 8 cards, 3 for scale-out.
//  [G1WP]  Habana Gaudi Training Platform White Paper (2019): one GEMM
//          engine, 8 TPCs, PCIe Gen4 x16; HLS-1: 7 of the 10 ports
//          all-to-all between the 8 cards, 3 for scale-out.
//  [MMEF]  Habana forum, "About MME profiling result with Intel Gaudi
//          Software" (2024, Habana's answer): Gaudi 2's 2 logical MMEs are
//          each configured per product as Symmetric 256x256, 2xWide
//          128x512 or 2xHigh 512x128 (height x width of the output tile).
//  [PCIE]  PCI-SIG: Gen4 16 GT/s, Gen5 32 GT/s per lane, 128b/130b coding:
//          x16 carries 31.5 / 63.0 GB/s per direction.
//  [ROCE]  RoCE v2 framing: per 4096-byte payload, 82 bytes of Ethernet
//          (14 + 4 FCS + 20 preamble and gap), IP (20), UDP (8), BTH (12)
//          and ICRC (4): 4096 / 4178 of the line rate is payload.

constexpr double kRoceEfficiency = 4096.0 / 4178.0;  // [ROCE]

// TPC instructions per element of a pass are per op (the estimator's op
// table); a TPC issues one 256-byte vector FMA per cycle [G3WP]: 128 bf16
// or 64 fp32 lanes.
constexpr double kTpcVectorBytes = 256.0;
// One-way latency of one collective step between two cards (one RDMA write
// and its completion over one switch or a direct link). Assumed: typical
// RoCE v2 figures are 2-5 microseconds; 5.
constexpr double kLinkLatencySeconds = 5e-6;
// Host memory bandwidth one card's offloaded optimizer gets: a two-socket
// server of 16 DDR4-3200 channels (409.6 GB/s) shared by 8 cards. Assumed
// server configuration; 51.2 GB/s.
constexpr double kHostMemoryGBpsPerCard = 409.6 / 8;
// Cards per server, wired all-to-all [G2WP], [G3WP].
constexpr int kCardsPerServer = 8;

struct EngineTable {
  int mmes, mmeSide;
  bool mmeReshapes;  // the side x side array also runs as side/2 x 2side and 2side x side/2
  int tpcs;
  double pcieGBps;
  int scaleUpPorts, scaleOutPorts;
};

EngineTable enginesOf(Generation g) {
  switch (g) {
    case Generation::kGaudi:
      // The GEMM engine's geometry is not published; assumed one 128x128 array.
      return {1, 128, false, 8, 31.5, 7, 3};  // [G1WP], [PCIE]
    case Generation::kGaudi2:
      return {2, 256, true, 24, 31.5, 21, 3};  // [G2WP], [MMEF], [PCIE]
    case Generation::kGaudi3:
      // Gaudi 3's MMEs are Gaudi 2's design, four times over [G3WP];
      // assumed to keep its three geometries [MMEF].
      return {8, 256, true, 64, 63.0, 21, 3};  // [G3WP], [PCIE]
  }
  HPU_CHECK(false, "unknown generation");
  return {};
}

double ceilDiv(double a, double b) { return std::ceil(a / b); }

}  // namespace

GaudiModel::GaudiModel(Generation generation, JobTopology topology)
    : GaudiModel(generation, topology, calibrationFor(generation)) {}

GaudiModel::GaudiModel(Generation generation, JobTopology topology, const Calibration& calibration)
    : spec_(specFor(generation)), topology_(topology), calibration_(calibration) {
  const EngineTable e = enginesOf(generation);
  engines_ = {e.mmes, e.mmeSide, e.mmeReshapes, e.tpcs, e.pcieGBps, e.scaleUpPorts, e.scaleOutPorts};
  // Clock from the published bf16 peak: peak = MMEs x side^2 MACs x 2 FLOP
  // x clock (Gaudi 2: 1.65 GHz, Gaudi 3: 1.75 GHz).
  clockHz_ = *peakTflops(spec_, DType::kBFloat16) * 1e12 / (2.0 * engines_.mmes * engines_.mmeSide * engines_.mmeSide);
}

double GaudiModel::matrixPeakFlops(DType dtype) const {
  if (auto p = peakTflops(spec_, dtype)) return *p * 1e12;
  const double bf16 = *peakTflops(spec_, DType::kBFloat16) * 1e12;
  // fp16 shares bf16's multipliers (same 16-bit operand width). fp32 has no
  // published MME figure: assumed a quarter of bf16 (a 24-bit mantissa
  // product needs several 8-bit-mantissa multiplier passes).
  if (dtype == DType::kFloat16) return bf16;
  return bf16 / 4;
}

Work GaudiModel::matrixWork(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, DType dtype,
                            DType out_dtype) const {
  Work w;
  if (batch <= 0 || m <= 0 || n <= 0 || k <= 0) return w;
  // Output tiles spread over the engines; each takes K steps (one rank-1
  // update of its height x width accumulators per cycle) plus the operands'
  // wavefront crossing the array, (height + width) / 2 cycles (half of a
  // systolic array's skew; `side` for a square one). The graph compiler
  // picks the geometry that finishes first [MMEF]: a 78-row decode product
  // fills 61% of a 128-row tile, 30% of a 256-row one.
  const double side = engines_.mmeSide;
  const std::array<std::pair<double, double>, 3> geometries{{{side, side}, {side / 2, side * 2}, {side * 2, side / 2}}};
  double cycles = std::numeric_limits<double>::infinity();
  for (const auto& [height, width] : std::span(geometries).first(engines_.mmeReshapes ? 3 : 1)) {
    const double tiles = static_cast<double>(batch) * ceilDiv(static_cast<double>(m), height) *
                         ceilDiv(static_cast<double>(n), width);
    cycles = std::min(cycles, ceilDiv(tiles, engines_.mmes) * (static_cast<double>(k) + (height + width) / 2));
  }
  const double dtype_rate = matrixPeakFlops(dtype) / matrixPeakFlops(DType::kBFloat16);
  w.mme = cycles / clockHz_ / dtype_rate;
  const double bytes =
      static_cast<double>(batch) *
      ((static_cast<double>(m) * k + static_cast<double>(k) * n) * static_cast<double>(logicalSize(dtype)) +
       static_cast<double>(m) * n * static_cast<double>(logicalSize(out_dtype)));
  w.hbm = bytes / (spec_.hbmTerabytesPerSecond * 1e12);
  return w;
}

double GaudiModel::matrixSeconds(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, DType dtype,
                                 DType out_dtype) const {
  return seconds(matrixWork(batch, m, n, k, dtype, out_dtype));
}

Work GaudiModel::vectorWork(double bytes, double elements, double vector_instructions, DType dtype) const {
  const double lanes = kTpcVectorBytes / static_cast<double>(std::max<std::size_t>(1, logicalSize(dtype)));
  Work w;
  w.tpc = elements * vector_instructions / (lanes * engines_.tpcs * clockHz_);
  w.hbm = bytes / (spec_.hbmTerabytesPerSecond * 1e12);
  return w;
}

double GaudiModel::vectorSeconds(double bytes, double elements, double vector_instructions, DType dtype) const {
  return seconds(vectorWork(bytes, elements, vector_instructions, dtype));
}

GaudiModel::Priced GaudiModel::price(const Work& w) const {
  const Calibration& c = calibration_;
  const bool attention = w.matrix == Work::Matrix::kAttention;
  const double mme = w.mme / (attention ? c.attention : c.mme), tpc = w.tpc / c.tpc, hbm = w.hbm / c.hbm;
  Priced p{std::max({mme, tpc, hbm}), w.host_link + w.host_memory, Bound::kNone};
  if (p.engines > 0)
    p.bound = mme >= tpc && mme >= hbm ? (attention ? Bound::kAttention : Bound::kMme) : tpc >= hbm ? Bound::kTpc : Bound::kHbm;
  return p;
}

double GaudiModel::hostLinkSeconds(double bytes) const { return bytes / (engines_.pcieGBps * 1e9); }

double GaudiModel::hostMemorySeconds(double bytes) const { return bytes / (kHostMemoryGBpsPerCard * 1e9); }

double GaudiModel::hostSecondsPerGraph() const { return calibration_.host_per_graph; }

GaudiModel::Group GaudiModel::group(int group_size, int group_nodes) const {
  const int size = group_size > 0 ? group_size : topology_.worldSize();
  const int nodes = group_size > 0 ? std::max(group_nodes, 1) : topology_.numNodes;
  return {size, nodes, std::min(size / nodes, kCardsPerServer)};
}

int GaudiModel::collectivePeers(int group_size, int group_nodes) const {
  const Group g = group(group_size, group_nodes);
  if (g.size <= 1) return 0;
  return g.per_node - 1 + std::min(g.nodes - 1, 2);
}

double GaudiModel::collectiveSeconds(CollectiveKind kind, double bytes, int group_size, int group_nodes) const {
  const auto [size, nodes, n] = group(group_size, group_nodes);
  if (size <= 1) return 0;
  if (kind == CollectiveKind::kBarrier) return 2 * std::ceil(std::log2(size)) * kLinkLatencySeconds;
  // Bytes/s of one port: its payload rate at the calibrated efficiency.
  const double gbit = spec_.nicGbitPerPort * 1e9 / 8 * kRoceEfficiency * calibration_.collective;
  // Inside a server each card has scaleUpPorts / 7 ports to each other card,
  // so a direct (all-to-all) reduce-scatter or allgather moves its n - 1
  // blocks of bytes / n in parallel, one per peer link.
  const double peer_link = engines_.scaleUpPorts / static_cast<double>(kCardsPerServer - 1) * gbit;
  const double out_link = engines_.scaleOutPorts * gbit;
  const double block = bytes / n;
  const double intra_half = n > 1 ? block / peer_link + kLinkLatencySeconds : 0;  // a reduce-scatter or allgather
  // Across nodes: a ring over the nodes among the cards of the same local
  // rank, on each card's own bytes / n, over its scale-out ports.
  const double ring = nodes > 1 ? (nodes - 1.0) / nodes * block / out_link + (nodes - 1.0) * kLinkLatencySeconds : 0;
  const double overhead = calibration_.collective_overhead * collectivePeers(group_size, group_nodes);
  switch (kind) {
    case CollectiveKind::kAllreduce:
      return overhead + 2 * intra_half + 2 * ring;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllgather:
      return overhead + intra_half + ring;
    case CollectiveKind::kBroadcast:
      return overhead + (n > 1 ? bytes / (peer_link * (n - 1)) + kLinkLatencySeconds : 0) +
             (nodes > 1 ? bytes / out_link + std::log2(nodes) * kLinkLatencySeconds : 0);
    case CollectiveKind::kAlltoall: {
      // `bytes` is what a rank sends, bytes / size to each peer (balanced
      // routing): its n - 1 peers in the server over their own links at
      // once, the others over its scale-out ports, one node after another,
      // the two at the same time.
      const double to_peer = bytes / size;
      const double inside = n > 1 ? to_peer / peer_link + kLinkLatencySeconds : 0;
      const double outside =
          nodes > 1 ? (size - n) * to_peer / out_link + (nodes - 1.0) * kLinkLatencySeconds : 0;
      return overhead + std::max(inside, outside);
    }
    case CollectiveKind::kBarrier:
      break;
  }
  return 0;
}

std::vector<Assumption> GaudiModel::assumptions() const {
  const double gbit = spec_.nicGbitPerPort * 1e9 / 8 * kRoceEfficiency;
  return {
      {"mme_count", static_cast<double>(engines_.mmes), "engines", "Gaudi white papers ([G2WP], [G3WP])"},
      {"mme_array_side", static_cast<double>(engines_.mmeSide), "MACs",
       "[G3WP]: 256x256 per MME (Gaudi 1: assumed 128)"},
      {"mme_clock", clockHz_ / 1e9, "GHz", "bf16 peak / (MMEs x side^2 x 2 FLOP)"},
      {"mme_geometries", engines_.mmeReshapes ? 3.0 : 1.0, "shapes per product",
       engines_.mmeReshapes ? "[MMEF]: 256x256, 128x512, 512x128; the fastest per product" : "square only"},
      {"mme_tile_fill", static_cast<double>(engines_.mmeSide), "cycles per output tile",
       "(height + width) / 2, half a systolic array's skew: side for the square array, 320 for 128x512"},
      {"matrix_peak_bf16", matrixPeakFlops(DType::kBFloat16) / 1e12, "TFLOP/s", "[HC24], [G3WP]"},
      {"matrix_peak_fp8", matrixPeakFlops(DType::kFloat8E4M3) / 1e12, "TFLOP/s",
       peakTflops(spec_, DType::kFloat8E4M3) ? "[G3WP]" : "no fp8 on this generation: priced as fp32"},
      {"matrix_peak_fp32", matrixPeakFlops(DType::kFloat32) / 1e12, "TFLOP/s", "assumed bf16 peak / 4 (unpublished)"},
      {"tpc_count", static_cast<double>(engines_.tpcs), "cores", "[G1WP], [G2WP], [G3WP]"},
      {"tpc_vector_bytes", kTpcVectorBytes, "bytes per cycle", "[G3WP]: 256-byte SIMD, one FMA per cycle"},
      {"hbm_bandwidth", spec_.hbmTerabytesPerSecond, "TB/s", "[HC24]"},
      {"mme_efficiency", calibration_.mme, "of the dtype's peak", calibration_.source},
      {"attention_efficiency", calibration_.attention, "of the matrix peak", calibration_.source},
      {"tpc_efficiency", calibration_.tpc, "of the vector peak", calibration_.source},
      {"hbm_efficiency", calibration_.hbm, "of peak", calibration_.source},
      {"collective_efficiency", calibration_.collective, "of the ports' payload rate", calibration_.source},
      {"collective_overhead", calibration_.collective_overhead * 1e6, "us per collective and peer",
       calibration_.source},
      {"pcie_bandwidth", engines_.pcieGBps, "GB/s per direction", "[PCIE]: Gen4 / Gen5 x16"},
      {"host_memory_bandwidth", kHostMemoryGBpsPerCard, "GB/s per card", "assumed: 16 DDR4-3200 channels / 8 cards"},
      {"nic_port_rate", static_cast<double>(spec_.nicGbitPerPort), "Gbit/s", "[G1WP], [G2WP], [G3WP]"},
      {"roce_payload_efficiency", kRoceEfficiency, "of line rate", "[ROCE]: 4096 of 4178 bytes"},
      {"scale_up_ports", static_cast<double>(engines_.scaleUpPorts), "ports", "all-to-all inside a server"},
      {"scale_up_bandwidth", engines_.scaleUpPorts * gbit / 1e9, "GB/s per card", "ports x rate x payload"},
      {"scale_out_ports", static_cast<double>(engines_.scaleOutPorts), "ports", "to other servers"},
      {"scale_out_bandwidth", engines_.scaleOutPorts * gbit / 1e9, "GB/s per card", "ports x rate x payload"},
      {"link_latency", kLinkLatencySeconds * 1e6, "us per collective step", "assumed: RoCE v2, 2-5 us"},
      {"host_per_graph", calibration_.host_per_graph * 1e3, "ms per launched graph", calibration_.source},
  };
}

}  // namespace hpu::device
