/* collbench: time MPI collectives as the OSU micro-benchmarks do, for `colltune bench --library`.
 *
 * Usage: collbench COLLECTIVES SIZES WARMUP ITERATIONS [MIN_SECONDS [NETWORK_SECONDS [BACK_TO_BACK]]]
 *   COLLECTIVES  comma-separated: bcast, scatter, gather, allgather, alltoall, reduce, allreduce,
 *                barrier
 *   SIZES        comma-separated block sizes in bytes (the bytes one rank sends to or receives
 *                from one other rank; ignored by barrier, which runs once at size 0)
 *   WARMUP       untimed calls before the timed ones
 *   ITERATIONS   timed calls per size, at least
 *   MIN_SECONDS  (default 0) time each size for about this long at least: the calls are raised
 *                from ITERATIONS to MIN_SECONDS over the slowest rank's fastest warm-up call (up
 *                to MAX_CALLS; with WARMUP 0 they stay ITERATIONS), as OSU runs more iterations
 *                for small messages than for large ones (colltune.tune.library_bench.MIN_TIME
 *                says why)
 *   NETWORK_SECONDS  (default 0) before anything is timed, every rank exchanges NETWORK_BLOCK bytes
 *                with every other rank, one peer at a time, by point-to-point calls (not the
 *                library's all-to-all, which a selection file or a forced algorithm may route over
 *                a few peers only), round after round, for about this long (colltune.tune.library_bench.NETWORK_WARMUP
 *                says why: TCP's congestion windows, not the library, set a fresh job's first
 *                seconds); rank 0 then prints "network-warmup ROUNDS SECONDS"
 *   BACK_TO_BACK (default 0) 1: after the calls timed one by one, time as many again back to back
 *                (a barrier before the first and after the last, none between them), as a
 *                program's loop of collectives calls them
 *
 * For each collective and size every rank times each call alone (MPI_Wtime around the call, an
 * MPI_Barrier between calls, as OSU does), and the program prints one line per (collective, size):
 *
 *   collective size max_avg min_avg avg_avg iterations back_to_back
 *
 * where max_avg is the slowest rank's average time per call in seconds (the figure colltune
 * compares), min_avg the fastest rank's and avg_avg the ranks' mean (the figure OSU prints as its
 * average latency), and back_to_back the seconds per call of the back-to-back loop, the slowest
 * rank's (0 without BACK_TO_BACK).  Rooted collectives use root 0.  Reductions sum MPI_FLOAT
 * elements (size / 4 of them) when size is a multiple of 4, else MPI_UNSIGNED_CHAR.  Buffers are initialised once and results are not checked: this is a timing
 * client; tests/mpi checks results.
 *
 * The program asks for MPI_THREAD_MULTIPLE: under it MPICH yields the processor while it waits,
 * where under MPI_THREAD_SINGLE it spins, which on a machine with fewer cores than ranks (the
 * emulated testbed runs 8 ranks on 2 cores) costs milliseconds per call and measures the
 * scheduler, not the network.  Set COLLBENCH_THREAD_SINGLE=1 to init with MPI_Init instead.
 *
 * Before each (collective, size) every rank sleeps REST_SECONDS between two barriers, which OSU
 * does not: with more ranks than cores, a size that follows one in which some ranks computed far
 * more than others runs slow, in steps of about 5.6 ms per call on the testbed, until every rank
 * has slept (colltune.tune.measure.REST says what was measured).
 */
#define _POSIX_C_SOURCE 199309L
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_ITEMS = 256, NETWORK_BLOCK = 262144 };
static const long MAX_CALLS = 100000;
static const double REST_SECONDS = 0.05;

static void rest(void) {
  MPI_Barrier(MPI_COMM_WORLD);
  struct timespec t = {0, (long)(REST_SECONDS * 1e9)};
  while (nanosleep(&t, &t) == -1 && errno == EINTR) continue;
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Rounds of a pairwise exchange: in step i of a round every rank sends NETWORK_BLOCK bytes to rank
 * + i and receives as many from rank - i, so each rank sends to one and receives from one at a time
 * (no incast, whose losses would leave each connection's window to chance), until rank 0 has seen
 * `seconds` pass (its verdict is broadcast, so every rank stops together); rank 0 then prints
 * "network-warmup ROUNDS SECONDS". */
static void warm_network(double seconds, int rank, int procs) {
  if (!(seconds > 0) || procs < 2) return;
  char *out = calloc(NETWORK_BLOCK, 1), *in = malloc(NETWORK_BLOCK);
  if (!out || !in) {
    fprintf(stderr, "collbench: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const double t0 = MPI_Wtime();
  long rounds = 0;
  for (int done = 0; !done; ++rounds) {
    for (int i = 1; i < procs; ++i)
      MPI_Sendrecv(out, NETWORK_BLOCK, MPI_BYTE, (rank + i) % procs, 0, in, NETWORK_BLOCK, MPI_BYTE,
                   (rank - i + procs) % procs, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    done = rank == 0 && MPI_Wtime() - t0 >= seconds;
    MPI_Bcast(&done, 1, MPI_INT, 0, MPI_COMM_WORLD);
  }
  if (rank == 0) printf("network-warmup %ld %.6f\n", rounds, MPI_Wtime() - t0);
  free(out);
  free(in);
}

static int split(char *text, char **items) {
  int n = 0;
  for (char *tok = strtok(text, ","); tok && n < MAX_ITEMS; tok = strtok(NULL, ",")) items[n++] = tok;
  return n;
}

static void usage(int rank, const char *why) {
  if (rank == 0)
    fprintf(stderr,
            "collbench: %s\nusage: collbench COLLECTIVES SIZES WARMUP ITERATIONS [MIN_SECONDS [NETWORK_SECONDS "
            "[BACK_TO_BACK]]]\n",
            why);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

static int call(const char *coll, void *send, void *recv, int count, MPI_Datatype type, MPI_Datatype rtype,
                int rcount, MPI_Comm comm) {
  if (!strcmp(coll, "bcast")) return MPI_Bcast(recv, count, type, 0, comm);
  if (!strcmp(coll, "scatter")) return MPI_Scatter(send, count, type, recv, count, type, 0, comm);
  if (!strcmp(coll, "gather")) return MPI_Gather(send, count, type, recv, count, type, 0, comm);
  if (!strcmp(coll, "allgather")) return MPI_Allgather(send, count, type, recv, count, type, comm);
  if (!strcmp(coll, "alltoall")) return MPI_Alltoall(send, count, type, recv, count, type, comm);
  if (!strcmp(coll, "reduce")) return MPI_Reduce(send, recv, rcount, rtype, MPI_SUM, 0, comm);
  if (!strcmp(coll, "allreduce")) return MPI_Allreduce(send, recv, rcount, rtype, MPI_SUM, comm);
  return MPI_Barrier(comm);
}

static int known(const char *coll) {
  static const char *names[] = {"bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce",
                                "barrier"};
  for (size_t i = 0; i < sizeof names / sizeof *names; ++i)
    if (!strcmp(coll, names[i])) return 1;
  return 0;
}

int main(int argc, char **argv) {
  const char *single = getenv("COLLBENCH_THREAD_SINGLE");
  if (single && !strcmp(single, "1")) {
    MPI_Init(&argc, &argv);
  } else {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  }
  int rank, procs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &procs);
  if (argc < 5 || argc > 8) usage(rank, "wrong number of arguments");
  char *colls[MAX_ITEMS], *size_text[MAX_ITEMS];
  const int ncolls = split(argv[1], colls), nsizes = split(argv[2], size_text);
  const long warmup = atol(argv[3]), iterations = atol(argv[4]);
  const double min_seconds = argc > 5 ? atof(argv[5]) : 0.0, network_seconds = argc > 6 ? atof(argv[6]) : 0.0;
  const int back_to_back = argc > 7 ? atoi(argv[7]) : 0;
  if (warmup < 0 || iterations < 1 || !(min_seconds >= 0) || !(network_seconds >= 0) ||
      (back_to_back != 0 && back_to_back != 1))
    usage(rank, "WARMUP must be >= 0, ITERATIONS >= 1, MIN_SECONDS and NETWORK_SECONDS >= 0, BACK_TO_BACK 0 or 1");
  long sizes[MAX_ITEMS], largest = 0;
  for (int i = 0; i < nsizes; ++i) {
    char *end;
    sizes[i] = strtol(size_text[i], &end, 10);
    if (*end || sizes[i] < 0 || sizes[i] > (1L << 30)) usage(rank, "a size is not a byte count from 0 to 2^30");
    if (sizes[i] > largest) largest = sizes[i];
  }
  for (int c = 0; c < ncolls; ++c)
    if (!known(colls[c])) usage(rank, "unknown collective");
  const size_t bytes = (size_t)largest * (size_t)procs + 64;
  char *send = malloc(bytes), *recv = malloc(bytes);
  if (!send || !recv) usage(rank, "out of memory");
  for (size_t i = 0; i < bytes; ++i) send[i] = (char)(i * 7 + rank), recv[i] = 0;
  warm_network(network_seconds, rank, procs);
  for (int c = 0; c < ncolls; ++c) {
    const int barrier = !strcmp(colls[c], "barrier");
    for (int s = 0; s < (barrier ? 1 : nsizes); ++s) {
      const long size = barrier ? 0 : sizes[s];
      const int floats = size % 4 == 0;
      const MPI_Datatype rtype = floats ? MPI_FLOAT : MPI_UNSIGNED_CHAR;
      const int rcount = (int)(floats ? size / 4 : size);
      double total = 0, fastest_warm = -1;
      rest();
      for (long i = 0; i < warmup; ++i) {
        const double t0 = MPI_Wtime();
        call(colls[c], send, recv, (int)size, MPI_BYTE, rtype, rcount, MPI_COMM_WORLD);
        const double t = MPI_Wtime() - t0;
        if (fastest_warm < 0 || t < fastest_warm) fastest_warm = t;
        MPI_Barrier(MPI_COMM_WORLD);
      }
      long n = iterations;
      if (min_seconds > 0 && warmup > 0) {
        /* every rank must make the same number of calls: count them from the slowest rank's figure */
        double per_call;
        MPI_Allreduce(&fastest_warm, &per_call, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        const double want = per_call > 0 ? min_seconds / per_call : (double)MAX_CALLS;
        if (want > (double)n) n = want >= (double)MAX_CALLS ? MAX_CALLS : (long)want + 1;
      }
      for (long i = 0; i < n; ++i) {
        const double t0 = MPI_Wtime();
        call(colls[c], send, recv, (int)size, MPI_BYTE, rtype, rcount, MPI_COMM_WORLD);
        total += MPI_Wtime() - t0;
        MPI_Barrier(MPI_COMM_WORLD);
      }
      double avg = total / (double)n, worst, best, sum, loop = 0, slowest_loop = 0;
      MPI_Reduce(&avg, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      MPI_Reduce(&avg, &best, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
      MPI_Reduce(&avg, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
      if (back_to_back) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (long i = 0; i < n; ++i) call(colls[c], send, recv, (int)size, MPI_BYTE, rtype, rcount, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        loop = (MPI_Wtime() - t0) / (double)n;
        MPI_Reduce(&loop, &slowest_loop, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      }
      if (rank == 0) {
        printf("%s %ld %.9e %.9e %.9e %ld %.9e\n", colls[c], size, worst, best, sum / procs, n, slowest_loop);
        fflush(stdout);
      }
    }
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
