// Open MPI's collectives (MPI_Allreduce and friends, its tuned algorithms) as a ProcessGroup's
// native collectives, for jobs that mpirun (or srun with PMIx) started: the
// ZeroMQ rendezvous still admits the ranks (token, config digest, naming of
// missing ones) and watches their health; the data moves through MPI's tuned
// algorithms and transports. Built when CMake finds MPI (Debian:
// libopenmpi-dev); joinProcessGroup chooses it with HPU_COLLECTIVES.
//
// Numerics: a float32 sum is MPI_SUM (IEEE addition, as this library's);
// bfloat16 sums and every min and max are MPI user operations running this
// library's kernels (collectives/reduce_kernels.h: bfloat16 widened and
// rounded to nearest-even, NaN propagated by min and max); avg is the sum
// divided by the world size on every rank. MPI chooses the order in
// which ranks' values are summed, so with more than two ranks a sum may
// differ in its last bits from the transport's ring; every rank gets the
// same result as long as MPI's algorithm gives every rank the same (Open
// MPI's do).
// Waits: MPI's blocking collectives (its non-blocking ones run other, slower
// algorithms: 3.3x the time at 4 MiB here) under a watchdog thread that
// checks ctx.checkAlive() every 50 ms; a lost or frozen rank, an abort or the
// deadline make this rank log why and exit 1, and mpirun stops the rest.
// Thread-safety: MPI_THREAD_SERIALIZED; the ProcessGroup runs one collective
// at a time (the watchdog calls no MPI function).
#pragma once

#include <memory>

#include "../collectives/native.h"

namespace hpu::comm::detail {

// Initialises MPI (once per process) and checks that its world is the job's:
// `size` processes, this one rank `rank`. Throws EnvError naming both sides
// when it is not (a process not started by mpirun is a world of one).
std::unique_ptr<NativeCollectives> makeMpiCollectives(int rank, int size);

}  // namespace hpu::comm::detail
