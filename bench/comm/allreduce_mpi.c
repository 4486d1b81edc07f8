/* One rank of Open MPI's MPI_Allreduce, timed as bench_allreduce times ours.
 *
 *   mpirun --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo -np N allreduce_mpi <bytes:iterations,...>
 *
 * Float32 sums in place, timed as mpi_bench.h says. Built by
 * bench/comm/allreduce_vs.py with mpicc. */
#include "mpi_bench.h"

static void allreduce(struct bench_buffers* b) {
  MPI_Allreduce(MPI_IN_PLACE, b->in, b->count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
  return bench_plan(argc, argv, "allreduce_mpi <bytes:iterations,...>", allreduce);
}
