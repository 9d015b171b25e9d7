/* A small MPI application for record mode (COLLTUNE_RECORD): work between calls, a ring of
 * blocking sends and receives, a ring of non-blocking ones received from MPI_ANY_SOURCE, a
 * sendrecv, collectives on MPI_COMM_WORLD and on a split communicator.  Prints "OK P" on rank 0.
 *
 * Usage: record_app WORK_SECONDS BYTES */

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void work(double seconds) {
  const double until = MPI_Wtime() + seconds;
  while (MPI_Wtime() < until) {
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int P, me;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (argc != 3) {
    if (me == 0) fprintf(stderr, "usage: record_app WORK_SECONDS BYTES\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const double seconds = atof(argv[1]);
  const int n = atoi(argv[2]);
  char *a = calloc((size_t)n * (size_t)P + 1, 1), *b = calloc((size_t)n * (size_t)P + 1, 1);
  const int right = (me + 1) % P, left = (me + P - 1) % P;

  work(seconds);
  if (me % 2 == 0) {  /* a ring of blocking calls, without deadlock */
    MPI_Send(a, n, MPI_BYTE, right, 1, MPI_COMM_WORLD);
    MPI_Recv(b, n, MPI_BYTE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(b, n, MPI_BYTE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(a, n, MPI_BYTE, right, 1, MPI_COMM_WORLD);
  }
  work(seconds);
  MPI_Request reqs[2];
  MPI_Irecv(b, n, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &reqs[0]);
  MPI_Isend(a, n, MPI_BYTE, right, 7, MPI_COMM_WORLD, &reqs[1]);
  MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
  MPI_Sendrecv(a, n, MPI_BYTE, right, 3, b, n, MPI_BYTE, left, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Request one;
  MPI_Isend(a, n, MPI_BYTE, left, 4, MPI_COMM_WORLD, &one);
  MPI_Recv(b, n, MPI_BYTE, right, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Wait(&one, MPI_STATUS_IGNORE);
  work(seconds);
  MPI_Bcast(a, n, MPI_BYTE, 0, MPI_COMM_WORLD);
  MPI_Allreduce(a, b, n / 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &half);
  MPI_Gather(a, n, MPI_BYTE, b, n, MPI_BYTE, 0, half);
  MPI_Comm_free(&half);
  work(seconds);
  MPI_Barrier(MPI_COMM_WORLD);
  free(a), free(b);
  if (me == 0) printf("OK %d\n", P);
  MPI_Finalize();
  return 0;
}
