#include "hpu/device/cpu_isa.h"

#include <spdlog/fmt/fmt.h>

#include <atomic>
#include <string>

#include "hpu/device/errors.h"
#include "kernels/isa/kernels.h"

namespace hpu::device {
namespace {

constexpr CpuIsa kAll[] = {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Bf16};

// -1: not chosen yet.
std::atomic<int> g_isa{-1};

}  // namespace

std::string_view cpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kPortable:
      return "portable";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx512Bf16:
      return "avx512_bf16";
  }
  return "?";
}

bool cpuSupports(CpuIsa isa) {
#if defined(__x86_64__)
  // libgcc's CPUID reading also checks that the OS saves the vector state (XGETBV).
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  switch (isa) {
    case CpuIsa::kPortable:
      return true;
    case CpuIsa::kAvx2:
      return avx2;
    case CpuIsa::kAvx512:
      return avx512;
    case CpuIsa::kAvx512Bf16:
      return avx512 && __builtin_cpu_supports("avx512bf16");
  }
  return false;
#else
  return isa == CpuIsa::kPortable;
#endif
}

std::vector<CpuIsa> supportedCpuIsas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : kAll)
    if (cpuSupports(isa)) out.push_back(isa);
  return out;
}

CpuIsa defaultCpuIsa() {
  const CpuIsa best = supportedCpuIsas().back();
  return best == CpuIsa::kAvx512Bf16 && !kernels::pairedDotProductsPayOff() ? CpuIsa::kAvx512 : best;
}

CpuIsa cpuIsaFromEnv(const Environment& env) {
  const std::vector<CpuIsa> supported = supportedCpuIsas();
  const std::optional<std::string> value = env.get("HPU_CPU_ISA");
  if (!value || value->empty()) return defaultCpuIsa();
  std::string names;
  for (CpuIsa isa : supported) names += fmt::format("{}{}", names.empty() ? "" : ", ", cpuIsaName(isa));
  for (CpuIsa isa : kAll) {
    if (*value != cpuIsaName(isa)) continue;
    if (!cpuSupports(isa))
      throw EmulatorConfigError("HPU_CPU_ISA",
                                fmt::format("this CPU cannot run the {} kernels; it runs {}", *value, names));
    return isa;
  }
  throw EmulatorConfigError("HPU_CPU_ISA",
                            fmt::format("unknown instruction set '{}'; this CPU runs {}", *value, names));
}

CpuIsa cpuIsa() {
  int isa = g_isa.load(std::memory_order_relaxed);
  if (isa < 0) {
    isa = static_cast<int>(defaultCpuIsa());
    g_isa.store(isa, std::memory_order_relaxed);
  }
  return static_cast<CpuIsa>(isa);
}

void setCpuIsa(CpuIsa isa) { g_isa.store(static_cast<int>(isa), std::memory_order_relaxed); }

}  // namespace hpu::device
