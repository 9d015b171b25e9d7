/* An iterative MPI application for benchmarks/record_testbed.py: record it, predict it, compare.
 *
 *   record_stencil ITERATIONS WORK_US HALO_BYTES BCAST_BYTES ALLTOALL_BYTES EVERY
 *
 * Each iteration: WORK_US microseconds of "computation" (the rank sleeps, so that 8 ranks on 2
 * cores do not take the CPU from the ranks that communicate), a halo exchange with both ring
 * neighbours (MPI_Sendrecv of HALO_BYTES each way), and an MPI_Allreduce of one double; every
 * EVERY-th iteration also an MPI_Bcast of BCAST_BYTES from rank 0 and an MPI_Alltoall of
 * ALLTOALL_BYTES per block.  The run starts and ends with an MPI_Barrier.  Every rank prints
 *   elapsed RANK SECONDS
 * the time from the end of the first barrier to the end of the last one.
 *
 * It asks for MPI_THREAD_MULTIPLE: MPICH then yields the core while it waits, which matters when
 * ranks outnumber cores (under MPI_THREAD_SINGLE its waiting ranks spin). */

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void work(long microseconds) {
  struct timespec t = {microseconds / 1000000, (microseconds % 1000000) * 1000};
  while (nanosleep(&t, &t) != 0) {
  }
}

int main(int argc, char **argv) {
  int provided, P, me;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (argc != 7) {
    if (me == 0)
      fprintf(stderr, "usage: record_stencil ITERATIONS WORK_US HALO_BYTES BCAST_BYTES ALLTOALL_BYTES EVERY\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int iterations = atoi(argv[1]), every = atoi(argv[6]);
  const long work_us = atol(argv[2]);
  const int halo = atoi(argv[3]), bcast = atoi(argv[4]), a2a = atoi(argv[5]);
  if (iterations < 0 || work_us < 0 || halo < 0 || bcast < 0 || a2a < 0 || every < 1) {
    if (me == 0) fprintf(stderr, "record_stencil: negative sizes or EVERY < 1\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  char *out = calloc((size_t)halo + 1, 1), *in = calloc((size_t)halo + 1, 1);
  char *message = calloc((size_t)bcast + 1, 1);
  char *send = calloc((size_t)a2a * (size_t)P + 1, 1), *recv = calloc((size_t)a2a * (size_t)P + 1, 1);
  const int right = (me + 1) % P, left = (me + P - 1) % P;
  double residual = 1.0, sum = 0.0;

  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iterations; ++i) {
    work(work_us);
    MPI_Sendrecv(out, halo, MPI_BYTE, right, 1, in, halo, MPI_BYTE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(out, halo, MPI_BYTE, left, 2, in, halo, MPI_BYTE, right, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Allreduce(&residual, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (i % every == every - 1) {
      MPI_Bcast(message, bcast, MPI_BYTE, 0, MPI_COMM_WORLD);
      MPI_Alltoall(send, a2a, MPI_BYTE, recv, a2a, MPI_BYTE, MPI_COMM_WORLD);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  printf("elapsed %d %.9f\n", me, MPI_Wtime() - start);
  free(out), free(in), free(message), free(send), free(recv);
  MPI_Finalize();
  return 0;
}
