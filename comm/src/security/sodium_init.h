// libsodium must be initialised once before use; sodium_init() is thread-safe
// and idempotent, this wrapper turns its failure into a CommError.
#pragma once

namespace hpu::comm::detail {
void initSodium();
}  // namespace hpu::comm::detail
