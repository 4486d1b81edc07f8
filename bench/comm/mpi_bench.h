/* What the Open MPI sides of the comm benchmarks share (allreduce_mpi.c,
 * alltoall_mpi.c): the plan "bytes:iterations,..." from argv[argc - 1], and
 * for each entry float32 buffers of `bytes`, the input written with ones as
 * bench_alltoall writes its own (the pages of a calloc never written all
 * read the kernel's one zero page, which stays in cache: Open MPI's copies
 * out of it made its 1 MiB alltoall look 1.3x faster), 10% (at least 2)
 * untimed warm-up calls, a barrier, the timed calls; each rank's mean time
 * per call is max-reduced and rank 0 prints "<bytes> <seconds per call>", as
 * the ranks of bench_allreduce and bench_alltoall do. */
#pragma once

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bench_buffers {
  float* in;
  float* out;
  int count; /* floats in each */
};

/* Runs the plan with `call` as the collective; returns main's exit code. */
static int bench_plan(int argc, char** argv, const char* usage, void (*call)(struct bench_buffers*)) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc < 2) {
    if (rank == 0) fprintf(stderr, "usage: %s\n", usage);
    MPI_Abort(MPI_COMM_WORLD, 64);
  }
  char* plan = strdup(argv[argc - 1]);
  for (char* entry = strtok(plan, ","); entry != NULL; entry = strtok(NULL, ",")) {
    size_t bytes = 0;
    int iterations = 0;
    if (sscanf(entry, "%zu:%d", &bytes, &iterations) != 2) MPI_Abort(MPI_COMM_WORLD, 64);
    struct bench_buffers b;
    b.count = (int)(bytes / sizeof(float));
    b.in = malloc((b.count > 0 ? (size_t)b.count : 1) * sizeof(float));
    for (int i = 0; i < b.count; ++i) b.in[i] = 1.0f;
    b.out = calloc(b.count > 0 ? (size_t)b.count : 1, sizeof(float));
    const int warmup = iterations / 10 > 2 ? iterations / 10 : 2;
    for (int i = 0; i < warmup; ++i) call(&b);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int i = 0; i < iterations; ++i) call(&b);
    const double mine = (MPI_Wtime() - start) / iterations;
    double slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("%zu %.9g\n", bytes, slowest);
    free(b.in);
    free(b.out);
  }
  free(plan);
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
