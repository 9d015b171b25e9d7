/* The cost of the interposition library on calls it sends back to the MPI library.
 *
 * Under LD_PRELOAD=$(colltune lib) with a table that says "native" everywhere, MPI_<Coll> goes
 * through colltune's wrapper (its signature lookup) to PMPI_<Coll>, while PMPI_<Coll> called
 * directly is the library alone.  This program times both, interleaved, in the same job:
 *
 *   pmpi_overhead ROUNDS SIZE[,SIZE...] [COLLECTIVE[,COLLECTIVE...] [MIN_CALLS]]
 *
 * For each collective (default: all eight) and block size (bytes, a multiple of 8), each of ROUNDS
 * rounds times a loop of back-to-back MPI_ calls and one of PMPI_ calls (in alternating order;
 * each loop about 5 ms and at least MIN_CALLS calls, default 200; the slowest rank's time per
 * call), after a warm-up.  With a table that picks one of colltune's algorithms, MPI_ is that
 * algorithm and PMPI_ the library's default.  Rank 0 prints one line per round:
 *   COLL SIZE ROUND wrapped_seconds_per_call library_seconds_per_call */

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BCAST, SCATTER, GATHER, ALLGATHER, ALLTOALL, REDUCE, ALLREDUCE, BARRIER, NCOLL };
static const char *NAMES[NCOLL] = {"bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce",
                                   "barrier"};
static int P, me;
static char *a, *b;

static void call(int coll, int wrapped, int count) {
  switch (coll) {
    case BCAST:
      (wrapped ? MPI_Bcast : PMPI_Bcast)(a, count, MPI_INT, 0, MPI_COMM_WORLD);
      break;
    case SCATTER:
      (wrapped ? MPI_Scatter : PMPI_Scatter)(a, count, MPI_INT, b, count, MPI_INT, 0, MPI_COMM_WORLD);
      break;
    case GATHER:
      (wrapped ? MPI_Gather : PMPI_Gather)(a, count, MPI_INT, b, count, MPI_INT, 0, MPI_COMM_WORLD);
      break;
    case ALLGATHER:
      (wrapped ? MPI_Allgather : PMPI_Allgather)(a, count, MPI_INT, b, count, MPI_INT, MPI_COMM_WORLD);
      break;
    case ALLTOALL:
      (wrapped ? MPI_Alltoall : PMPI_Alltoall)(a, count, MPI_INT, b, count, MPI_INT, MPI_COMM_WORLD);
      break;
    case REDUCE:
      (wrapped ? MPI_Reduce : PMPI_Reduce)(a, b, count / 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
      break;
    case ALLREDUCE:
      (wrapped ? MPI_Allreduce : PMPI_Allreduce)(a, b, count / 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      break;
    default:
      (wrapped ? MPI_Barrier : PMPI_Barrier)(MPI_COMM_WORLD);
  }
}

/* Seconds per call of a loop of n calls, the slowest rank's. */
static double loop(int coll, int wrapped, int count, long n) {
  PMPI_Barrier(MPI_COMM_WORLD);
  double t = MPI_Wtime();
  for (long i = 0; i < n; ++i) call(coll, wrapped, count);
  t = (MPI_Wtime() - t) / (double)n;
  double slowest;
  PMPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

int main(int argc, char **argv) {
  /* MPI_THREAD_MULTIPLE: MPICH's progress loop then yields the core while it waits, so that with
     more ranks than cores a waiting rank does not spin out its whole time slice (with
     MPI_THREAD_SINGLE a broadcast at P = 4 on 2 cores takes 2 ms instead of 10 us). */
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (argc < 3 || argc > 5) {
    if (me == 0) fprintf(stderr, "usage: pmpi_overhead ROUNDS SIZE[,SIZE...] [COLLECTIVE[,...] [MIN_CALLS]]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int rounds = atoi(argv[1]);
  const long min_calls = argc > 4 ? atol(argv[4]) : 200;
  int wanted[NCOLL];
  for (int c = 0; c < NCOLL; ++c) {
    char padded[64];
    snprintf(padded, sizeof padded, ",%s,", NAMES[c]);
    char given[512];
    snprintf(given, sizeof given, ",%s,", argc > 3 ? argv[3] : "");
    wanted[c] = argc <= 3 || strstr(given, padded) != NULL;
  }
  char *list = strdup(argv[2]);
  size_t max = 8;
  for (char *s = list; *s;) {
    size_t v = strtoull(s, &s, 10);
    if (v > max) max = v;
    if (*s == ',') ++s;
  }
  a = calloc(max * (size_t)P, 1);
  b = calloc(max * (size_t)P, 1);
  strcpy(list, argv[2]);
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    const int size = atoi(tok), count = size / 4;
    for (int coll = 0; coll < NCOLL; ++coll) {
      if (!wanted[coll] || (coll == BARRIER && size != atoi(argv[2]))) continue; /* one barrier, at the first size */
      /* calibrate: n calls take about 5 ms, and n >= MIN_CALLS: with more ranks than cores, a
         short loop is dominated by the ranks waking up after the barrier (a scheduler tick) */
      long n = min_calls;
      for (int w = 0; w < 2; ++w) loop(coll, w, count, n);
      double t = loop(coll, 0, count, n);
      n = (long)(5e-3 / (t > 1e-8 ? t : 1e-8));
      if (n < min_calls) n = min_calls;
      long agreed;
      PMPI_Allreduce(&n, &agreed, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
      for (int r = 0; r < rounds; ++r) {
        double wrapped, library;
        if (r % 2) {
          library = loop(coll, 0, count, agreed);
          wrapped = loop(coll, 1, count, agreed);
        } else {
          wrapped = loop(coll, 1, count, agreed);
          library = loop(coll, 0, count, agreed);
        }
        if (me == 0) printf("%s %d %d %.9e %.9e\n", NAMES[coll], size, r, wrapped, library);
      }
    }
  }
  fflush(stdout);
  free(list), free(a), free(b);
  MPI_Finalize();
  return 0;
}
