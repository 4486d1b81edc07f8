// The Store of a ZeroMQ job: requests ride on the control connection to
// rank 0, whose RendezvousServer holds the values and the waiters.
// Thread-safety: as Store (any thread).
#pragma once

#include <memory>

#include "hpu/comm/store.h"
#include "session.h"

namespace hpu::comm::detail {

std::shared_ptr<Store> makeZmqStore(std::shared_ptr<ZmqSession> session);

}  // namespace hpu::comm::detail
