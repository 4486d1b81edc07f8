/* One rank of Open MPI's MPI_Alltoall (or, with -v, MPI_Alltoallv with the
 * same counts), timed as bench_alltoall times ours.
 *
 *   mpirun --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo -np N alltoall_mpi [-v] <bytes:iterations,...>
 *
 * bytes is what each rank sends: float32 blocks of bytes / 4 / N elements,
 * one per rank, timed as mpi_bench.h says. Built by bench/comm/alltoall_vs.py
 * with mpicc. */
#include "mpi_bench.h"

static int* counts;
static int* displacements;

static void alltoall(struct bench_buffers* b) {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Alltoall(b->in, b->count / n, MPI_FLOAT, b->out, b->count / n, MPI_FLOAT, MPI_COMM_WORLD);
}

static void alltoallv(struct bench_buffers* b) {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (counts == NULL) {
    counts = calloc((size_t)n, sizeof(int));
    displacements = calloc((size_t)n, sizeof(int));
  }
  for (int r = 0; r < n; ++r) {
    counts[r] = b->count / n;
    displacements[r] = r * (b->count / n);
  }
  MPI_Alltoallv(b->in, counts, displacements, MPI_FLOAT, b->out, counts, displacements, MPI_FLOAT, MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
  const int v = argc > 2 && strcmp(argv[1], "-v") == 0;
  const int code = bench_plan(argc, argv, "alltoall_mpi [-v] <bytes:iterations,...>", v ? alltoallv : alltoall);
  free(counts);
  free(displacements);
  return code;
}
