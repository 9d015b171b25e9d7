/* Under mpiexec, with or without LD_PRELOAD=$(colltune lib): call every collective colltune
 * intercepts through MPI_* and again through PMPI_* (always the MPI library's own) on the same
 * inputs, and require the results to be equal byte for byte.
 *
 * Usage: pmpi_check SIZE[,SIZE...]   block sizes in bytes (multiples of 8)
 *
 * For each size: every root of the rooted collectives, MPI_IN_PLACE where MPI allows it, int and
 * double reductions (sum, max), a derived datatype and a user operation (both must reach the
 * library unchanged), on MPI_COMM_WORLD, on a split communicator and on a duplicate freed at
 * once.  When the interposition library is preloaded, rank 0 prints how many calls each algorithm
 * ran ("ran COLLECTIVE ALGORITHM N"), asked with colltune_pmpi_last_algorithm().  A mismatch ends
 * the job with MPI_Abort.  PMPI_CHECK_CORRUPT=R makes rank R corrupt one result (to test that). */

#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int me, nprocs, corrupt_rank = -1;
static const char *(*last_algorithm)(void);

#define MAX_TALLY 256
static struct {
  char what[96];
  long n;
} tally[MAX_TALLY];
static int ntally;

static void note(const char *coll) {
  if (last_algorithm == NULL) return;
  char what[96];
  snprintf(what, sizeof what, "%s %s", coll, last_algorithm());
  for (int i = 0; i < ntally; ++i)
    if (strcmp(tally[i].what, what) == 0) {
      tally[i].n++;
      return;
    }
  if (ntally < MAX_TALLY) {
    strcpy(tally[ntally].what, what);
    tally[ntally++].n = 1;
  }
}

static void same(const char *what, size_t size, int root, const void *got, const void *want, size_t n) {
  const unsigned char *g = got, *w = want;
  for (size_t i = 0; i < n; ++i)
    if (g[i] != w[i]) {
      fprintf(stderr, "rank %d of %d: %s (block %zu bytes, root %d): byte %zu is %u, the library gives %u\n", me,
              nprocs, what, size, root, i, g[i], w[i]);
      fflush(stderr);
      usleep(300000); /* hydra drops what it has not yet forwarded once the abort kills the job */
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* n bytes of rank r's data for this call, as int32 values below 1000 (sums stay exact). */
static void fill(void *buf, size_t n, int r, int salt) {
  int *v = buf;
  for (size_t i = 0; i < n / 4; ++i) v[i] = (int)((i * 7 + (size_t)r * 131 + (size_t)salt * 17) % 997);
}

static void fill_double(void *buf, size_t n, int r, int salt) {
  double *v = buf;
  for (size_t i = 0; i < n / 8; ++i) v[i] = (double)((i * 5 + (size_t)r * 37 + (size_t)salt) % 1009) - 400.0;
}

static void *alloc(size_t n, int pattern) {
  void *p = malloc(n ? n : 1);
  memset(p, pattern, n ? n : 1);
  return p;
}

static void user_max(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  int *a = in, *b = inout;
  for (int i = 0; i < *len; ++i)
    if (a[i] > b[i]) b[i] = a[i];
}

static void damage(void *buf, size_t n) {
  if (me == corrupt_rank && n > 0) ((unsigned char *)buf)[n - 1] ^= 0x5a;
}

/* Call MPI_<fn> with OUT = a, note which algorithm ran it as COLL, call PMPI_<fn> with OUT = b,
   then require a and b to hold the same N bytes on the ranks where WHEN holds. */
#define BOTH(fn, coll, label, when, n, ...)                        \
  do {                                                             \
    void *OUT = a;                                                 \
    MPI_##fn(__VA_ARGS__);                                         \
    note(coll);                                                    \
    OUT = b;                                                       \
    PMPI_##fn(__VA_ARGS__);                                        \
    damage(a, (n));                                                \
    snprintf(what, sizeof what, "%s %s", where, label);            \
    if (when) same(what, size, root, a, b, (n));                   \
  } while (0)

static void check_size(MPI_Comm comm, const char *where, size_t size, MPI_Op user_op, MPI_Datatype quad) {
  int P, r;
  MPI_Comm_size(comm, &P);
  MPI_Comm_rank(comm, &r);
  const int count = (int)(size / 4), dcount = (int)(size / 8);
  const size_t all = size * (size_t)P;
  char what[128];
  void *a = alloc(all, 0), *b = alloc(all, 0), *s = alloc(all, 0), *s2 = alloc(all, 0);
  int roots[3] = {0, P - 1, P / 2}, nroots = P > 2 ? 3 : P > 1 ? 2 : 1;
  int root = 0;

  for (int k = 0; k < nroots; ++k) {
    root = roots[k];
    const int at_root = r == root;
    fill(a, size, root, 1), memcpy(b, a, size);
    if (!at_root) memset(a, 0xee, size), memset(b, 0xee, size);
    BOTH(Bcast, "bcast", "bcast", 1, size, OUT, count, MPI_INT, root, comm);

    /* scatter, and in place at the root (whose send buffer must stay as it was) */
    fill(s, all, root, 2), memcpy(s2, s, all);
    memset(a, 0xee, size), memset(b, 0xee, size);
    BOTH(Scatter, "scatter", "scatter", 1, size, s, count, MPI_INT, OUT, count, MPI_INT, root, comm);
    BOTH(Scatter, "scatter", "scatter in place", !at_root, size, s, count, MPI_INT, at_root ? MPI_IN_PLACE : OUT,
         count, MPI_INT, root, comm);
    if (at_root) same("scatter in place: the root's send buffer", size, root, s, s2, all);

    /* gather, and in place at the root */
    fill(s, size, r, 3);
    memset(a, 0xee, all), memset(b, 0xee, all);
    BOTH(Gather, "gather", "gather", at_root, all, s, count, MPI_INT, OUT, count, MPI_INT, root, comm);
    if (at_root) fill((char *)a + (size_t)root * size, size, r, 3), memcpy(b, a, all);
    BOTH(Gather, "gather", "gather in place", at_root, all, at_root ? MPI_IN_PLACE : s, count, MPI_INT, OUT, count,
         MPI_INT, root, comm);

    /* reduce: int sum, double max, in place at the root */
    fill(s, size, r, 4);
    memset(a, 0xee, size), memset(b, 0xee, size);
    BOTH(Reduce, "reduce", "reduce int sum", at_root, size, s, OUT, count, MPI_INT, MPI_SUM, root, comm);
    fill_double(s, size, r, 5);
    BOTH(Reduce, "reduce", "reduce double max", at_root, size, s, OUT, dcount, MPI_DOUBLE, MPI_MAX, root, comm);
    fill(a, size, r, 6), fill(b, size, r, 6), fill(s, size, r, 6);
    BOTH(Reduce, "reduce", "reduce in place", at_root, size, at_root ? MPI_IN_PLACE : s, OUT, count, MPI_INT,
         MPI_SUM, root, comm);
  }
  root = 0;

  /* allgather, and in place */
  fill(s, size, r, 7);
  memset(a, 0xee, all), memset(b, 0xee, all);
  BOTH(Allgather, "allgather", "allgather", 1, all, s, count, MPI_INT, OUT, count, MPI_INT, comm);
  fill((char *)a + (size_t)r * size, size, r, 8), memcpy(b, a, all);
  BOTH(Allgather, "allgather", "allgather in place", 1, all, MPI_IN_PLACE, count, MPI_INT, OUT, count, MPI_INT, comm);

  /* alltoall, and in place */
  fill(s, all, r, 9);
  memset(a, 0xee, all), memset(b, 0xee, all);
  BOTH(Alltoall, "alltoall", "alltoall", 1, all, s, count, MPI_INT, OUT, count, MPI_INT, comm);
  fill(a, all, r, 10), memcpy(b, a, all);
  BOTH(Alltoall, "alltoall", "alltoall in place", 1, all, MPI_IN_PLACE, count, MPI_INT, OUT, count, MPI_INT, comm);

  /* allreduce: int sum, double sum (exact), in place */
  fill(s, size, r, 11);
  BOTH(Allreduce, "allreduce", "allreduce int sum", 1, size, s, OUT, count, MPI_INT, MPI_SUM, comm);
  fill_double(s, size, r, 12);
  BOTH(Allreduce, "allreduce", "allreduce double sum", 1, size, s, OUT, dcount, MPI_DOUBLE, MPI_SUM, comm);
  fill(a, size, r, 13), fill(b, size, r, 13);
  BOTH(Allreduce, "allreduce", "allreduce in place", 1, size, MPI_IN_PLACE, OUT, count, MPI_INT, MPI_MAX, comm);

  /* what must reach the library unchanged: a derived datatype, a user operation */
  fill(a, size, 0, 14), memcpy(b, a, size);
  if (r != 0) memset(a, 0xee, size), memset(b, 0xee, size);
  BOTH(Bcast, "bcast-derived", "bcast of a derived datatype", 1, size, OUT, count, quad, 0, comm);
  fill(s, size, r, 15);
  BOTH(Allreduce, "allreduce-user-op", "allreduce with a user operation", 1, size, s, OUT, count, MPI_INT, user_op,
       comm);

  MPI_Barrier(comm);
  note("barrier");
  free(a), free(b), free(s), free(s2);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  if (argc != 2) {
    if (me == 0) fprintf(stderr, "usage: pmpi_check SIZE[,SIZE...]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const char *bad = getenv("PMPI_CHECK_CORRUPT");
  if (bad != NULL) corrupt_rank = atoi(bad);
  last_algorithm = (const char *(*)(void))dlsym(RTLD_DEFAULT, "colltune_pmpi_last_algorithm");
  MPI_Op user_op;
  MPI_Op_create(user_max, 1, &user_op);
  MPI_Datatype quad;
  MPI_Type_contiguous(4, MPI_BYTE, &quad);
  MPI_Type_commit(&quad);
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, nprocs - me, &half);

  char *list = strdup(argv[1]);
  for (char *tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ",")) {
    const size_t size = (size_t)strtoull(tok, NULL, 10);
    if (size % 8) {
      if (me == 0) fprintf(stderr, "pmpi_check: sizes must be multiples of 8, got %zu\n", size);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    check_size(MPI_COMM_WORLD, "world", size, user_op, quad);
    check_size(half, "split", size, user_op, quad);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    check_size(dup, "dup", size, user_op, quad);
    MPI_Comm_free(&dup);
  }
  free(list);
  MPI_Comm_free(&half);
  MPI_Type_free(&quad);
  MPI_Op_free(&user_op);
  if (me == 0) {
    for (int i = 0; i < ntally; ++i) printf("ran %s %ld\n", tally[i].what, tally[i].n);
    printf("OK %d ranks\n", nprocs);
  }
  MPI_Finalize();
  return 0;
}
