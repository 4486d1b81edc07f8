/* One rank of Open MPI's MPI_Allreduce, timed as bench_allreduce times ours.
 *
 *   mpirun --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo -np N allreduce_mpi <bytes:iterations,...>
 *
 * For each plan entry: float32 zeros, 10% (at least 2) untimed warm-up
 * allreduces (sum, in place), a barrier, the timed iterations; each rank's
 * mean time per allreduce is max-reduced and rank 0 prints
 * "<bytes> <seconds per allreduce>". Built by bench/comm/allreduce_vs.py with mpicc. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 2) {
    if (rank == 0) fprintf(stderr, "usage: allreduce_mpi <bytes:iterations,...>\n");
    MPI_Abort(MPI_COMM_WORLD, 64);
  }
  char* plan = strdup(argv[1]);
  for (char* entry = strtok(plan, ","); entry != NULL; entry = strtok(NULL, ",")) {
    size_t bytes = 0;
    int iterations = 0;
    if (sscanf(entry, "%zu:%d", &bytes, &iterations) != 2) MPI_Abort(MPI_COMM_WORLD, 64);
    const int count = (int)(bytes / sizeof(float));
    float* data = calloc(count > 0 ? (size_t)count : 1, sizeof(float));
    const int warmup = iterations / 10 > 2 ? iterations / 10 : 2;
    for (int i = 0; i < warmup; ++i) MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int i = 0; i < iterations; ++i) MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double mine = (MPI_Wtime() - start) / iterations;
    double slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("%zu %.9g\n", bytes, slowest);
    free(data);
  }
  free(plan);
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
