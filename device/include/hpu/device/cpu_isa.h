// The x86-64 instruction sets the matrix kernels (GEMM, convolutions) are
// built for. One binary carries them all and uses the best this CPU runs,
// chosen at start-up from CPUID (defaultCpuIsa); HPU_CPU_ISA picks another
// this CPU runs (to compare paths or test them all on one host):
//   avx512_bf16  AVX-512 (F, BW, DQ, VL) and AVX512_BF16: bf16 operands on VDPBF16PS
//   avx512       AVX-512 kernels; bf16 operands on the fp32 kernel
//   avx2         AVX2 + FMA kernels
//   portable     Eigen's products (any x86-64)
// Thread-safety: setCpuIsa() at start-up, before kernels run (and between
// kernels in tests); cpuIsa() from any thread.
#pragma once

#include <string_view>
#include <vector>

#include "hpu/env/environment.h"

namespace hpu::device {

enum class CpuIsa { kPortable, kAvx2, kAvx512, kAvx512Bf16 };

std::string_view cpuIsaName(CpuIsa isa);
// Whether this CPU and operating system can run the kernels built for `isa`.
bool cpuSupports(CpuIsa isa);
// Every ISA this CPU runs, lowest first.
std::vector<CpuIsa> supportedCpuIsas();

// The best ISA this CPU runs, except that where it runs avx512_bf16 but
// VDPBF16PS is not measured 1.25x as fast as the fp32 kernel on bf16
// operands (kernels::pairedDotProductsPayOff), avx512: those CPUs multiply
// bf16 operands faster in fp32 FMAs (exact products, another summation
// rounding). Measured once per process.
CpuIsa defaultCpuIsa();

// HPU_CPU_ISA from `env`: defaultCpuIsa() when unset. Throws
// EmulatorConfigError for an unknown name or one this CPU cannot run.
CpuIsa cpuIsaFromEnv(const Environment& env);

// The ISA the kernels use: set by setCpuIsa() (hpu-train sets
// cpuIsaFromEnv() of its environment at start-up), else defaultCpuIsa().
// REQUIRES: cpuSupports(isa).
CpuIsa cpuIsa();
void setCpuIsa(CpuIsa isa);

}  // namespace hpu::device
