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

static void check_size(MPI_Comm comm, const char *where, size_t size, MPI_Op user_op, MPI_Datatype quad) {
  int P, r;
  MPI_Comm_size(comm, &P);
  MPI_Comm_rank(comm, &r);
  const int count = (int)(size / 4), dcount = (int)(size / 8);
  const size_t all = size * (size_t)P;
  char what[128];
  void *a = alloc(all, 0), *b = alloc(all, 0), *s = alloc(all, 0), *s2 = alloc(all, 0);
  int roots[3] = {0, P - 1, P / 2}, nroots = P > 2 ? 3 : P > 1 ? 2 : 1;

  for (int k = 0; k < nroots; ++k) {
    const int root = roots[k];
    /* bcast */
    fill(a, size, root, 1);
    memcpy(b, a, size);
    if (r != root) memset(a, 0xee, size), memset(b, 0xee, size);
    MPI_Bcast(a, count, MPI_INT, root, comm);
    note("bcast");
    PMPI_Bcast(b, count, MPI_INT, root, comm);
    damage(a, size);
    snprintf(what, sizeof what, "%s bcast", where);
    same(what, size, root, a, b, size);

    /* scatter, and in place at the root */
    fill(s, all, root, 2);
    memset(a, 0xee, size), memset(b, 0xee, size);
    MPI_Scatter(s, count, MPI_INT, a, count, MPI_INT, root, comm);
    note("scatter");
    PMPI_Scatter(s, count, MPI_INT, b, count, MPI_INT, root, comm);
    snprintf(what, sizeof what, "%s scatter", where);
    same(what, size, root, a, b, size);
    memcpy(s2, s, all);
    MPI_Scatter(s, count, MPI_INT, r == root ? MPI_IN_PLACE : a, count, MPI_INT, root, comm);
    note("scatter");
    PMPI_Scatter(s2, count, MPI_INT, r == root ? MPI_IN_PLACE : b, count, MPI_INT, root, comm);
    snprintf(what, sizeof what, "%s scatter in place", where);
    same(what, size, root, r == root ? s : a, r == root ? s2 : b, r == root ? all : size);

    /* gather, and in place at the root */
    fill(s, size, r, 3);
    memset(a, 0xee, all), memset(b, 0xee, all);
    MPI_Gather(s, count, MPI_INT, a, count, MPI_INT, root, comm);
    note("gather");
    PMPI_Gather(s, count, MPI_INT, b, count, MPI_INT, root, comm);
    snprintf(what, sizeof what, "%s gather", where);
    if (r == root) same(what, size, root, a, b, all);
    if (r == root) fill((char *)a + (size_t)root * size, size, r, 3), memcpy(b, a, all);
    MPI_Gather(r == root ? MPI_IN_PLACE : s, count, MPI_INT, a, count, MPI_INT, root, comm);
    note("gather");
    PMPI_Gather(r == root ? MPI_IN_PLACE : s, count, MPI_INT, b, count, MPI_INT, root, comm);
    snprintf(what, sizeof what, "%s gather in place", where);
    if (r == root) same(what, size, root, a, b, all);

    /* reduce: int sum, double max, in place at the root */
    fill(s, size, r, 4);
    memset(a, 0xee, size), memset(b, 0xee, size);
    MPI_Reduce(s, a, count, MPI_INT, MPI_SUM, root, comm);
    note("reduce");
    PMPI_Reduce(s, b, count, MPI_INT, MPI_SUM, root, comm);
    snprintf(what, sizeof what, "%s reduce int sum", where);
    if (r == root) same(what, size, root, a, b, size);
    fill_double(s, size, r, 5);
    MPI_Reduce(s, a, dcount, MPI_DOUBLE, MPI_MAX, root, comm);
    note("reduce");
    PMPI_Reduce(s, b, dcount, MPI_DOUBLE, MPI_MAX, root, comm);
    snprintf(what, sizeof what, "%s reduce double max", where);
    if (r == root) same(what, size, root, a, b, size);
    fill(a, size, r, 6), fill(b, size, r, 6), fill(s, size, r, 6);
    MPI_Reduce(r == root ? MPI_IN_PLACE : s, a, count, MPI_INT, MPI_SUM, root, comm);
    note("reduce");
    PMPI_Reduce(r == root ? MPI_IN_PLACE : s, b, count, MPI_INT, MPI_SUM, root, comm);
    snprintf(what, sizeof what, "%s reduce in place", where);
    if (r == root) same(what, size, root, a, b, size);
  }

  /* allgather, and in place */
  fill(s, size, r, 7);
  memset(a, 0xee, all), memset(b, 0xee, all);
  MPI_Allgather(s, count, MPI_INT, a, count, MPI_INT, comm);
  note("allgather");
  PMPI_Allgather(s, count, MPI_INT, b, count, MPI_INT, comm);
  snprintf(what, sizeof what, "%s allgather", where);
  same(what, size, 0, a, b, all);
  fill((char *)a + (size_t)r * size, size, r, 8), memcpy(b, a, all);
  MPI_Allgather(MPI_IN_PLACE, count, MPI_INT, a, count, MPI_INT, comm);
  note("allgather");
  PMPI_Allgather(MPI_IN_PLACE, count, MPI_INT, b, count, MPI_INT, comm);
  snprintf(what, sizeof what, "%s allgather in place", where);
  same(what, size, 0, a, b, all);

  /* alltoall, and in place */
  fill(s, all, r, 9);
  memset(a, 0xee, all), memset(b, 0xee, all);
  MPI_Alltoall(s, count, MPI_INT, a, count, MPI_INT, comm);
  note("alltoall");
  PMPI_Alltoall(s, count, MPI_INT, b, count, MPI_INT, comm);
  snprintf(what, sizeof what, "%s alltoall", where);
  same(what, size, 0, a, b, all);
  fill(a, all, r, 10), memcpy(b, a, all);
  MPI_Alltoall(MPI_IN_PLACE, count, MPI_INT, a, count, MPI_INT, comm);
  note("alltoall");
  PMPI_Alltoall(MPI_IN_PLACE, count, MPI_INT, b, count, MPI_INT, comm);
  snprintf(what, sizeof what, "%s alltoall in place", where);
  same(what, size, 0, a, b, all);

  /* allreduce: int sum, double sum (exact), in place */
  fill(s, size, r, 11);
  MPI_Allreduce(s, a, count, MPI_INT, MPI_SUM, comm);
  note("allreduce");
  PMPI_Allreduce(s, b, count, MPI_INT, MPI_SUM, comm);
  snprintf(what, sizeof what, "%s allreduce int sum", where);
  same(what, size, 0, a, b, size);
  fill_double(s, size, r, 12);
  MPI_Allreduce(s, a, dcount, MPI_DOUBLE, MPI_SUM, comm);
  note("allreduce");
  PMPI_Allreduce(s, b, dcount, MPI_DOUBLE, MPI_SUM, comm);
  snprintf(what, sizeof what, "%s allreduce double sum", where);
  same(what, size, 0, a, b, size);
  fill(a, size, r, 13), fill(b, size, r, 13);
  MPI_Allreduce(MPI_IN_PLACE, a, count, MPI_INT, MPI_MAX, comm);
  note("allreduce");
  PMPI_Allreduce(MPI_IN_PLACE, b, count, MPI_INT, MPI_MAX, comm);
  snprintf(what, sizeof what, "%s allreduce in place", where);
  same(what, size, 0, a, b, size);

  /* what must reach the library unchanged: a derived datatype, a user operation */
  fill(a, size, 0, 14), memcpy(b, a, size);
  if (r != 0) memset(a, 0xee, size), memset(b, 0xee, size);
  MPI_Bcast(a, count / 1, quad, 0, comm);
  note("bcast-derived");
  PMPI_Bcast(b, count / 1, quad, 0, comm);
  snprintf(what, sizeof what, "%s bcast of a derived datatype", where);
  same(what, size, 0, a, b, size);
  fill(s, size, r, 15);
  MPI_Allreduce(s, a, count, MPI_INT, user_op, comm);
  note("allreduce-user-op");
  PMPI_Allreduce(s, b, count, MPI_INT, user_op, comm);
  snprintf(what, sizeof what, "%s allreduce with a user operation", where);
  same(what, size, 0, a, b, size);

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
