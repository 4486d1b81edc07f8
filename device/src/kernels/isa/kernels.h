// The matrix (and pooling) kernels one instruction set provides (isa/avx512.cc,
// avx512_bf16.cc, avx2.cc, portable.cc), and the table gemm.cc and conv.cc
// pick from at run time (cpu_isa.h).
#pragma once

#include <cstdint>

#include "../conv_geometry.h"
#include "hpu/device/cpu_isa.h"
#include "hpu/device/kernels/gemm.h"
#include "hpu/device/kernels/pool.h"

namespace hpu::device::kernels {

struct IsaKernels {
  // C (+)= op(A) op(B) on strided row-major matrices, on this thread.
  void (*gemm)(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
               std::int64_t lda, const float* b, std::int64_t ldb, bool accumulate, float* c, std::int64_t ldc);
  // The same on contiguous matrices, on the intra-op threads, then the
  // epilogue (applyEpilogue) block by block.
  void (*gemmThreaded)(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                       const float* b, bool accumulate, float* c, const GemmEpilogue& epilogue);
  // A convolution chunk's three products (conv.cc), on this thread, for nc
  // padded images xp and the output gradient dy [nc, k, p]:
  //   forward  out [k, nc * p] = W col        (W [k, crs])
  //   weight   dw [k, crs]     = dY col^T
  //   input    col [crs, nc * p] = W^T dY
  // where col is the column matrix of xp. Null in bf16 tables (convolutions
  // run in fp32).
  void (*convForward)(const ConvGeometry& g, const float* xp, std::int64_t nc, std::int64_t k, const float* w,
                      float* out);
  void (*convWeight)(const ConvGeometry& g, const float* xp, const float* dy, std::int64_t nc, std::int64_t k,
                     float* dw);
  void (*convInput)(const ConvGeometry& g, const float* w, const float* dy, std::int64_t nc, std::int64_t k,
                    float* col);
  // 2x2, stride 2, unpadded max pooling of planes [p0, p1): the same
  // maxima and arg-max indices as pool.cc's scalar loop, which runs where
  // this is null.
  void (*maxPool2x2)(const Pool2dShape& g, std::int64_t p0, std::int64_t p1, const float* x, float* y,
                     std::int32_t* argmax);
};

// The epilogue on rows [row0, row0 + rows) and columns [col0, col0 + cols)
// of C [m, ldc]; gemm.cc, for baseline x86-64 (the same bits on every
// instruction set).
void applyEpilogue(const GemmEpilogue& epilogue, float* c, std::int64_t ldc, std::int64_t row0, std::int64_t rows,
                   std::int64_t col0, std::int64_t cols);

extern const IsaKernels kPortableKernels, kAvx2Kernels, kAvx512Kernels, kAvx512Bf16Kernels;

// Whether the VDPBF16PS kernel multiplies bf16 operands at least 1.25x as
// fast as the AVX-512 fp32 kernel on this CPU, measured once per process
// (about 3 ms; every thread gets the first answer): VDPBF16PS does two
// products per lane where an FMA does one, but some CPUs issue it at half
// the FMA's rate or less (an Intel Xeon of 2026: 0.6x the fp32 kernel).
// REQUIRES: cpuSupports(CpuIsa::kAvx512Bf16).
bool pairedDotProductsPayOff();

// The kernels for `operands` on `isa`: bf16 operands use VDPBF16PS on
// avx512_bf16 and the fp32 kernels elsewhere.
inline const IsaKernels& isaKernels(CpuIsa isa, GemmOperands operands = GemmOperands::kFloat32) {
  switch (isa) {
    case CpuIsa::kAvx512Bf16:
      return operands == GemmOperands::kBFloat16 ? kAvx512Bf16Kernels : kAvx512Kernels;
    case CpuIsa::kAvx512:
      return kAvx512Kernels;
    case CpuIsa::kAvx2:
      return kAvx2Kernels;
    case CpuIsa::kPortable:
      break;
  }
  return kPortableKernels;
}

}  // namespace hpu::device::kernels
