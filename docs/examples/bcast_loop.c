#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Broadcast blocks of 1 KiB to 512 KiB from rank 0, 20 calls each after a barrier; print the
   slowest rank's mean time per call and check every byte. */
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char *buf = malloc(512 * 1024);
    for (int n = 1024; n <= 512 * 1024; n *= 8) {
        double total = 0.0;
        for (int it = 0; it < 20; it++) {
            memset(buf, rank == 0 ? 7 : 0, n);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Bcast(buf, n, MPI_CHAR, 0, MPI_COMM_WORLD);
            total += MPI_Wtime() - t0;
            for (int i = 0; i < n; i++)
                if (buf[i] != 7) { fprintf(stderr, "rank %d: wrong byte at %d\n", rank, i); MPI_Abort(MPI_COMM_WORLD, 1); }
        }
        double slowest;
        MPI_Reduce(&total, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) printf("bcast %7d B: %8.3f ms\n", n, slowest / 20 * 1e3);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
