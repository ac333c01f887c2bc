/* Open MPI's MPI_Allreduce timed as `ringreduce bench` times its all-reduce: fp32 sum, in
 * place, sizes from MIN to MAX bytes by a factor of 4, WARMUP untimed calls then ITERS
 * timed back to back, the slowest rank's mean time; busbw = bytes / time x 2(n-1)/n.
 * Results are checked once per size (every element must be the sum of the ranks' values).
 * Usage: mpirun -n N mpi_allreduce [MIN MAX ITERS WARMUP]  (default 4096 268435456 10 2)
 * Prints "bytes time_us busbw_GBs" per size, as bench/transports.sh reads it. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const size_t minBytes = argc > 1 ? strtoull(argv[1], NULL, 10) : 4096;
  const size_t maxBytes = argc > 2 ? strtoull(argv[2], NULL, 10) : (size_t)256 << 20;
  const int iters = argc > 3 ? atoi(argv[3]) : 10, warmup = argc > 4 ? atoi(argv[4]) : 2;
  float* buf = malloc(maxBytes);
  if (buf == NULL) {
    fprintf(stderr, "rank %d: cannot allocate %zu bytes\n", rank, maxBytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 4) {
    const int count = (int)(bytes / sizeof(float));
    for (int i = 0; i < count; ++i) buf[i] = (float)(rank + 1);
    MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long wrong = 0;
    for (int i = 0; i < count; ++i) wrong += buf[i] != (float)(n * (n + 1) / 2);
    for (int i = 0; i < warmup; ++i) MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double us = (MPI_Wtime() - t0) * 1e6 / iters, slowest;
    MPI_Allreduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long allWrong;
    MPI_Allreduce(&wrong, &allWrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
      printf("%12zu %12.2f %8.3f %s\n", bytes, slowest, bytes / (slowest * 1e3) * 2.0 * (n - 1) / n,
             allWrong ? "WRONG" : "");
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
