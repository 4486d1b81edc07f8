#include "job_end.h"

#include "hpu/core/app/failure.h"

namespace hpu::core::app {

void failJob(Strategy& strategy) {
  const std::exception_ptr error = std::current_exception();
  strategy.teardown(/*failed=*/true);
  const std::vector<comm::WorkerExit> workers = strategy.workerExits();
  if (workers.empty()) std::rethrow_exception(error);
  throw JobFailedError(reportJobFailure(failureOf(error), strategy.globalRank(), workers));
}

int finishJob(Strategy& strategy) {
  const int code = strategy.teardown(false);
  if (code != 0 && !strategy.workerExits().empty())
    return reportJobFailure(std::nullopt, strategy.globalRank(), strategy.workerExits());
  return code;
}

}  // namespace hpu::core::app
