#include "hpu/device/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "exp_loops.h"
#include "fast_exp.h"
#include "lane_sum.h"
#include "hpu/device/counter_random.h"
#include "hpu/device/check.h"
#include "hpu/device/kernels/gemm.h"
#include "hpu/device/numerics.h"
#include "hpu/device/threading.h"
#include "hpu/device/vector_clones.h"

namespace hpu::device::kernels {
namespace {

using detail::fastExp;

constexpr std::int64_t kRows = 64;   // queries per block
constexpr std::int64_t kCols = 128;  // keys per block
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// The keys query i may see: [lo, hi].
struct KeyRange {
  std::int64_t lo, hi;
};
KeyRange keysOf(const AttentionShape& g, std::int64_t i) {
  const std::int64_t hi = g.causal ? g.kv_len - g.q_len + i : g.kv_len - 1;
  const std::int64_t lo = g.causal && g.window > 0 ? std::max<std::int64_t>(0, hi - g.window + 1) : 0;
  return {lo, hi};
}

// Whether dropout keeps the probability of (row, key); row numbers the
// (batch, head, query) rows.
class DropoutMask {
 public:
  explicit DropoutMask(const AttentionShape& g)
      : seed_(g.dropout_seed),
        kv_len_(g.kv_len),
        rows_per_batch_(g.heads * g.q_len),
        offset_rows_(g.head_offset * g.q_len),
        all_rows_per_batch_((g.all_heads > 0 ? g.all_heads : g.heads) * g.q_len),
        threshold_(static_cast<std::uint32_t>(static_cast<double>(g.dropout_p) * 16777216.0)),
        keep_scale_(g.dropout_p > 0.0f ? 1.0f / (1.0f - g.dropout_p) : 1.0f),
        active_(g.dropout_p > 0.0f) {}
  bool active() const { return active_; }
  // 1 / (1 - p) when kept, 0 when dropped.
  float factor(std::int64_t row, std::int64_t key) const {
    // The row among all heads' (a tensor-parallel rank holds some of them).
    const std::int64_t all_row = row / rows_per_batch_ * all_rows_per_batch_ + offset_rows_ + row % rows_per_batch_;
    const std::uint64_t z = counterDraw(seed_, static_cast<std::uint64_t>(all_row * kv_len_ + key));
    return static_cast<std::uint32_t>(z >> 40) < threshold_ ? 0.0f : keep_scale_;
  }

 private:
  std::uint64_t seed_;
  std::int64_t kv_len_;
  std::int64_t rows_per_batch_, offset_rows_, all_rows_per_batch_;
  std::uint32_t threshold_;
  float keep_scale_;
  bool active_;
};

// The operands of the block products.
GemmOperands operandsOf(const AttentionShape& g) { return g.bf16 ? GemmOperands::kBFloat16 : GemmOperands::kFloat32; }

// A [rows, kCols] block as the next product's operand: rounded to bf16 when
// the attention runs in bf16.
void asOperand(const AttentionShape& g, float* block, std::int64_t rows) {
  if (g.bf16) roundInPlace({block, static_cast<std::size_t>(rows * kCols)}, DType::kBFloat16);
}

// Scores s[r, c] = (q_r . k_c) * scale of a block, -inf where masked.
void scores(const AttentionShape& g, const float* q, std::int64_t i0, std::int64_t rows, const float* k,
            std::int64_t j0, std::int64_t cols, float* s) {
  const std::int64_t d = g.head_dim;
  gemmSerial(false, true, rows, cols, d, q, d, k + j0 * d, d, false, s, kCols, operandsOf(g));
  for (std::int64_t r = 0; r < rows; ++r) {
    // The visible columns [lo, hi) of this row, scaled; the others masked.
    const KeyRange keys = keysOf(g, i0 + r);
    const std::int64_t lo = std::clamp<std::int64_t>(keys.lo - j0, 0, cols);
    const std::int64_t hi = std::clamp<std::int64_t>(keys.hi + 1 - j0, lo, cols);
    float* __restrict row = s + r * kCols;
    std::fill(row, row + lo, kMinusInf);
    for (std::int64_t c = lo; c < hi; ++c) row[c] *= g.scale;
    std::fill(row + hi, row + cols, kMinusInf);
  }
}

// The largest of x[0, n), -inf for none: eight running maxima combined at
// the end, the same value as one running maximum (max is exact) without
// its chain of dependent comparisons.
float rowMax(const float* x, std::int64_t n) {
  float m[8] = {kMinusInf, kMinusInf, kMinusInf, kMinusInf, kMinusInf, kMinusInf, kMinusInf, kMinusInf};
  std::int64_t c = 0;
  for (; c + 8 <= n; c += 8)
    for (int lane = 0; lane < 8; ++lane) m[lane] = std::max(m[lane], x[c + lane]);
  for (; c < n; ++c) m[0] = std::max(m[0], x[c]);
  return *std::max_element(m, m + 8);
}

// dS = P * (dP - rowdot) * scale of a block's row, in place of dP.
void scoreGradients(const float* __restrict p, float* __restrict dp, std::int64_t cols, float rowdot, float scale) {
  onVectorLevel([&]() HPU_LOOP_BODY {
    for (std::int64_t c = 0; c < cols; ++c) dp[c] = p[c] * (dp[c] - rowdot) * scale;
  });
}

}  // namespace

void attentionForward(const AttentionShape& g, const float* q, const float* k, const float* v, float* out, float* lse) {
  HPU_CHECK(g.heads % g.kv_heads == 0 && g.kv_rows >= g.kv_len && (g.causal || g.window == 0) &&
                (!g.causal || g.kv_len >= g.q_len),
            "attention shape: heads {}, kv_heads {}, q_len {}, kv_len {}, kv_rows {}", g.heads, g.kv_heads, g.q_len,
            g.kv_len, g.kv_rows);
  const std::int64_t d = g.head_dim, group = g.heads / g.kv_heads;
  const std::int64_t blocks = (g.q_len + kRows - 1) / kRows;
  const std::int64_t items = g.batch * g.heads * blocks;
  const DropoutMask dropout(g);
  static ParallelSite site("attention forward");
  parallelTasks(site, items, static_cast<double>(g.batch * g.heads * g.q_len * g.kv_len * d), [&](std::int64_t item) {
    thread_local std::vector<float> s, m, l;  // this thread's scratch
    s.resize(static_cast<std::size_t>(kRows * kCols));
    m.resize(kRows);
    l.resize(kRows);

    const std::int64_t bh = item / blocks, i0 = (item % blocks) * kRows;
    const std::int64_t rows = std::min(kRows, g.q_len - i0);
    const std::int64_t b = bh / g.heads, h = bh % g.heads;
    const float* qb = q + (bh * g.q_len + i0) * d;
    const float* kh = k + (b * g.kv_heads + h / group) * g.kv_rows * d;
    const float* vh = v + (b * g.kv_heads + h / group) * g.kv_rows * d;
    float* ob = out + (bh * g.q_len + i0) * d;
    std::fill(ob, ob + rows * d, 0.0f);
    std::fill(m.begin(), m.end(), kMinusInf);
    std::fill(l.begin(), l.end(), 0.0f);
    const std::int64_t lo = keysOf(g, i0).lo, hi = keysOf(g, i0 + rows - 1).hi;
    for (std::int64_t j0 = lo; j0 <= hi; j0 += kCols) {
      const std::int64_t cols = std::min(kCols, hi + 1 - j0);
      scores(g, qb, i0, rows, kh, j0, cols, s.data());
      for (std::int64_t r = 0; r < rows; ++r) {
        float* row = s.data() + r * kCols;
        const float mx = rowMax(row, cols);
        if (mx == kMinusInf) {  // no visible key in this block
          std::fill(row, row + cols, 0.0f);
          continue;
        }
        const std::size_t u = static_cast<std::size_t>(r);
        const float m_new = std::max(m[u], mx);
        const float alpha = fastExp(m[u] - m_new);
        l[u] = l[u] * alpha + detail::expShiftSum(row, cols, m_new);
        m[u] = m_new;
        float* o = ob + r * d;
        for (std::int64_t e = 0; e < d; ++e) o[e] *= alpha;
        if (dropout.active())
          for (std::int64_t c = 0; c < cols; ++c) row[c] *= dropout.factor(bh * g.q_len + i0 + r, j0 + c);
      }
      asOperand(g, s.data(), rows);
      gemmSerial(false, false, rows, d, cols, s.data(), kCols, vh + j0 * d, d, true, ob, d, operandsOf(g));
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::size_t u = static_cast<std::size_t>(r);
      const float inv = 1.0f / l[u];
      for (std::int64_t e = 0; e < d; ++e) ob[r * d + e] *= inv;
      lse[bh * g.q_len + i0 + r] = m[u] + std::log(l[u]);
    }
  });
}

void attentionBackward(const AttentionShape& g, const float* q, const float* k, const float* v, const float* out,
                       const float* dout, const float* lse, float* dq, bool accumulate_dq, float* dk, float* dv,
                       bool accumulate_kv) {
  const std::int64_t d = g.head_dim, group = g.heads / g.kv_heads;
  const std::int64_t items = g.batch * g.kv_heads;
  const DropoutMask dropout(g);
  // The first query that sees key j (causal) and the last (sliding window).
  const std::int64_t offset = g.kv_len - g.q_len;
  const auto firstQuery = [&](std::int64_t j) { return g.causal ? std::max<std::int64_t>(0, j - offset) : 0; };
  const auto lastQuery = [&](std::int64_t j) {
    return g.causal && g.window > 0 ? std::min(g.q_len - 1, j + g.window - 1 - offset) : g.q_len - 1;
  };
  static ParallelSite site("attention backward");
  parallelTasks(
      site, items, static_cast<double>(3 * g.batch * g.heads * g.q_len * g.kv_len * d), [&](std::int64_t item) {
        thread_local std::vector<float> p, dp, pd, dkb, dvb, rowdots;  // this thread's scratch
        for (auto* v : {&p, &dp, &pd}) v->resize(static_cast<std::size_t>(kRows * kCols));
        dkb.resize(static_cast<std::size_t>(kCols * d));
        dvb.resize(dkb.size());
        rowdots.resize(static_cast<std::size_t>(group * g.q_len));

        const std::int64_t b = item / g.kv_heads, kvh = item % g.kv_heads;
        // rowdot = dO . O of every query row of the group's heads, once (every
        // key block of a row uses it).
        for (std::int64_t hg = 0; hg < group; ++hg) {
          const std::int64_t bh = b * g.heads + kvh * group + hg;
          for (std::int64_t i = 0; i < g.q_len; ++i) {
            const float* dor = dout + (bh * g.q_len + i) * d;
            const float* outr = out + (bh * g.q_len + i) * d;
            rowdots[static_cast<std::size_t>(hg * g.q_len + i)] =
                detail::laneSum<float, 16>(d, [&](std::int64_t e) { return dor[e] * outr[e]; });
          }
        }
        const float* kh = k + item * g.kv_rows * d;
        const float* vh = v + item * g.kv_rows * d;
        if (!accumulate_dq)
          for (std::int64_t h = kvh * group; h < (kvh + 1) * group; ++h)
            std::fill(dq + (b * g.heads + h) * g.q_len * d, dq + (b * g.heads + h + 1) * g.q_len * d, 0.0f);
        for (std::int64_t j0 = 0; j0 < g.kv_len; j0 += kCols) {
          const std::int64_t cols = std::min(kCols, g.kv_len - j0);
          std::fill(dkb.begin(), dkb.end(), 0.0f);
          std::fill(dvb.begin(), dvb.end(), 0.0f);
          const std::int64_t first = firstQuery(j0), last = lastQuery(j0 + cols - 1);
          for (std::int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
            const std::int64_t bh = b * g.heads + h;
            for (std::int64_t i0 = first / kRows * kRows; i0 <= last; i0 += kRows) {
              const std::int64_t rows = std::min(kRows, g.q_len - i0);
              const float* qb = q + (bh * g.q_len + i0) * d;
              const float* dob = dout + (bh * g.q_len + i0) * d;
              const float* rowdot = rowdots.data() + (h - kvh * group) * g.q_len + i0;
              float* dqb = dq + (bh * g.q_len + i0) * d;
              scores(g, qb, i0, rows, kh, j0, cols, p.data());
              for (std::int64_t r = 0; r < rows; ++r)
                detail::expShift(p.data() + r * kCols, cols, lse[bh * g.q_len + i0 + r]);
              // With dropout O = (P * M) V for the mask factors M: dV = (P * M)^T dO,
              // dP = (dO V^T) * M, and rowdot = dO . O still equals sum_j P dP.
              // dV's operand: P, or a copy (P * M, or rounded to bf16): dS needs P itself.
              const float* pv = p.data();
              if (dropout.active() || g.bf16) {
                for (std::int64_t r = 0; r < rows; ++r)
                  for (std::int64_t c = 0; c < cols; ++c) {
                    const std::size_t x = static_cast<std::size_t>(r * kCols + c);
                    pd[x] = dropout.active() ? p[x] * dropout.factor(bh * g.q_len + i0 + r, j0 + c) : p[x];
                  }
                asOperand(g, pd.data(), rows);
                pv = pd.data();
              }
              const GemmOperands ops = operandsOf(g);
              gemmSerial(true, false, cols, d, rows, pv, kCols, dob, d, true, dvb.data(), d, ops);
              gemmSerial(false, true, rows, cols, d, dob, d, vh + j0 * d, d, false, dp.data(), kCols, ops);
              // dS = P * (dP - rowdot) * scale, in place of dP.
              for (std::int64_t r = 0; r < rows; ++r) {
                float* dpr = dp.data() + r * kCols;
                if (dropout.active())
                  for (std::int64_t c = 0; c < cols; ++c) dpr[c] *= dropout.factor(bh * g.q_len + i0 + r, j0 + c);
                scoreGradients(p.data() + r * kCols, dpr, cols, rowdot[r], g.scale);
              }
              asOperand(g, dp.data(), rows);
              gemmSerial(false, false, rows, d, cols, dp.data(), kCols, kh + j0 * d, d, true, dqb, d, ops);
              gemmSerial(true, false, cols, d, rows, dp.data(), kCols, qb, d, true, dkb.data(), d, ops);
            }
          }
          float* dkh = dk + item * g.kv_rows * d + j0 * d;
          float* dvh = dv + item * g.kv_rows * d + j0 * d;
          for (std::int64_t x = 0; x < cols * d; ++x) {
            dkh[x] = accumulate_kv ? dkh[x] + dkb[static_cast<std::size_t>(x)] : dkb[static_cast<std::size_t>(x)];
            dvh[x] = accumulate_kv ? dvh[x] + dvb[static_cast<std::size_t>(x)] : dvb[static_cast<std::size_t>(x)];
          }
        }
      });
}

}  // namespace hpu::device::kernels
