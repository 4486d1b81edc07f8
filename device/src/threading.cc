#include "hpu/device/threading.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <thread>

namespace hpu::device {

int defaultIntraOpThreads(int local_processes) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local_processes));
}

void setIntraOpThreads(int threads) {
  threads = std::max(1, threads);
  omp_set_num_threads(threads);
  Eigen::setNbThreads(threads);
}

int intraOpThreads() { return omp_get_max_threads(); }

}  // namespace hpu::device
