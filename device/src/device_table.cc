#include "hpu/device/device_table.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <vector>

#include "hpu/device/byte_size.h"

namespace hpu::device {
namespace {

std::string peaksOf(const DeviceSpec& spec) {
  std::string s;
  for (const MatrixPeak& p : spec.matrixPeaks)
    s += fmt::format("{}{} {:g}", s.empty() ? "" : ", ", dtypeName(p.dtype), p.tflops);
  return s;
}

std::string dtypesOf(const DeviceSpec& spec) {
  std::string s;
  for (DType t : spec.dtypes) s += fmt::format("{}{}", s.empty() ? "" : " ", dtypeName(t));
  return s;
}

}  // namespace

std::string formatDeviceTable(const Platform& platform) {
  const EmulatorSettings& settings = platform.settings();
  const DeviceSpec& spec = specFor(settings.generation);
  std::string out = fmt::format("HPU emulator: {}\n", describe(settings));
  out += fmt::format("{}: HBM {} at {:g} TB/s; matrix-engine peak TFLOP/s: {}; NIC {} x {} GbE RoCE v2\n",
                     spec.product, formatByteSize(spec.hbmBytes), spec.hbmTerabytesPerSecond, peaksOf(spec),
                     spec.nicPorts, spec.nicGbitPerPort);

  using Row = std::array<std::string, 5>;
  std::vector<Row> rows{{"HPU", "Module", "Generation", "Memory (in use / limit)", "DTypes"}};
  for (int i = 0; i < platform.autoDeviceCount(); ++i) {
    const Device& d = platform.device(i);
    const MemoryStats stats = d.allocator().stats();
    rows.push_back({d.name(), std::to_string(d.moduleId()), std::string(d.spec().name),
                    fmt::format("{} / {}", formatByteSize(stats.inUse), formatByteSize(stats.limit)),
                    dtypesOf(d.spec())});
  }
  std::array<std::size_t, 5> width{};
  for (const Row& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const Row& row : rows) {
    std::string line;
    for (std::size_t c = 0; c + 1 < row.size(); ++c) line += fmt::format("{:<{}}  ", row[c], width[c]);
    line += row.back();
    out += line + "\n";
  }
  return out;
}

}  // namespace hpu::device
