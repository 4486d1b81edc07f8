// A convolution chunk's geometry and its matrices as the packed kernels
// read them (sources.h): conv.cc runs the chunks, each instruction set's
// kernels (isa/) multiply them. Plain C++, the same for every instruction
// set.
//
// A chunk's images are first copied into zero-bordered scratch images
// (`pad` zeros around every channel, one image after another): the column
// matrix then reads them without bounds checks, from L1.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "hpu/device/kernels/conv.h"
#include "sources.h"

namespace hpu::device::kernels {

struct ConvGeometry {
  std::int64_t c, h, w, r, s, stride, pad, oh, ow;

  static ConvGeometry of(const Conv2dShape& g) {
    return {g.c, g.h, g.w, g.r, g.s, g.stride, g.pad, g.outH(), g.outW()};
  }
  std::int64_t crs() const { return c * r * s; }
  std::int64_t p() const { return oh * ow; }
  std::int64_t paddedH() const { return h + 2 * pad; }
  std::int64_t paddedW() const { return w + 2 * pad; }
  std::int64_t paddedFloats() const { return c * paddedH() * paddedW(); }
};

// The column matrix of a chunk's padded images (im2col's layout, [crs, nc * p]),
// read straight from the images:
// S[(c*r+i)*s+j][image*p + oy*ow + ox] = xp[image][c][oy*stride+i][ox*stride+j],
// image n's padded copy at xp + n * paddedFloats().
class ImageColumns {
 public:
  ImageColumns(const ConvGeometry& g, const float* xp)
      : g_(g), xp_(xp), hp_(g.paddedH()), wp_(g.paddedW()), row_offsets_(static_cast<std::size_t>(g.crs())) {
    // Tabled once: the packing asks for a row's offset once per row and
    // panel, and three divisions each time cost more than the row's loads.
    std::size_t row = 0;
    for (std::int64_t c = 0; c < g.c; ++c)
      for (std::int64_t i = 0; i < g.r; ++i)
        for (std::int64_t j = 0; j < g.s; ++j) row_offsets_[row++] = (c * hp_ + i) * wp_ + j;
  }

  const float* data() const { return xp_; }
  std::int64_t rowOffset(std::int64_t row) const { return row_offsets_[static_cast<std::size_t>(row)]; }
  // A run per stretch of one output row (stride 1), else a run per lane.
  void columnRuns(std::int64_t col0, std::int64_t count, packed::Runs& runs) const {
    const std::int64_t p = g_.p();
    std::int64_t image = col0 / p, oy = col0 % p / g_.ow, ox = col0 % p % g_.ow;
    runs.count = 0;
    for (std::int64_t lane = 0; lane < count;) {
      const std::int64_t len = g_.stride == 1 ? std::min(g_.ow - ox, count - lane) : 1;
      runs.mask[runs.count] = packed::laneRange(lane, lane + len);
      runs.offset[runs.count++] = image * g_.paddedFloats() + oy * g_.stride * wp_ + ox * g_.stride - lane;
      lane += len;
      ox += len;
      if (ox == g_.ow) {
        ox = 0;
        if (++oy == g_.oh) oy = 0, ++image;
      }
    }
  }

 private:
  ConvGeometry g_;
  const float* xp_;
  std::int64_t hp_, wp_;
  std::vector<std::int64_t> row_offsets_;
};

// The [image, k, p] tensor of a chunk's images as the matrix [k, nc * p]
// (the images' pixels side by side).
class ChannelRows {
 public:
  ChannelRows(const float* t, std::int64_t k, std::int64_t p) : t_(t), k_(k), p_(p) {}

  const float* data() const { return t_; }
  std::int64_t rowOffset(std::int64_t row) const { return row * p_; }
  void columnRuns(std::int64_t col0, std::int64_t count, packed::Runs& runs) const {
    runs.count = 0;
    for (std::int64_t lane = 0, col = col0; lane < count;) {
      const std::int64_t image = col / p_, q = col % p_, len = std::min(p_ - q, count - lane);
      runs.mask[runs.count] = packed::laneRange(lane, lane + len);
      runs.offset[runs.count++] = image * k_ * p_ + q - lane;
      lane += len;
      col += len;
    }
  }

 private:
  const float* t_;
  std::int64_t k_, p_;
};

}  // namespace hpu::device::kernels
