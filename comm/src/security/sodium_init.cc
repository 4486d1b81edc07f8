#include "sodium_init.h"

#include <sodium.h>

#include "hpu/comm/errors.h"

namespace hpu::comm::detail {

void initSodium() {
  if (sodium_init() < 0) throw CommError("libsodium failed to initialise; cannot derive the job's keys");
}

}  // namespace hpu::comm::detail
