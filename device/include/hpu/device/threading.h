// The intra-op thread count of this process: how many threads one kernel
// (GEMM, convolution, large elementwise loops) may use. Several ranks on one
// machine would oversubscribe its cores if each used all of them, so the
// default is cores / local processes (at least 1). HPU_INTRA_OP_THREADS
// overrides it. Thread-safety: set once at start-up, before kernels run.
#pragma once

namespace hpu::device {

// cores / local_processes, at least 1.
int defaultIntraOpThreads(int local_processes);
// Applies `threads` to every kernel of this process (OpenMP and Eigen).
void setIntraOpThreads(int threads);
int intraOpThreads();

}  // namespace hpu::device
