/* A small MPI program for corral's PMI-1 server tests: every rank prints its rank and
 * size, a token travels once around a ring (MPI_Send/MPI_Recv), and an MPI_Allreduce
 * across all ranks is checked. Exits 0 only if every check passed. With the argument
 * "abort", the last rank calls MPI_Abort with exit code 42 instead. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  printf("rank %d of %d\n", rank, size);
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "abort") == 0 && rank == size - 1) MPI_Abort(MPI_COMM_WORLD, 42);

  int failed = 0;
  if (size > 1) {
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int token = 0;
    if (rank == 0) {
      token = 1;
      MPI_Send(&token, 1, MPI_INT, next, 7, MPI_COMM_WORLD);
      MPI_Recv(&token, 1, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (token != size) {
        fprintf(stderr, "rank 0: ring token is %d, expected %d\n", token, size);
        failed = 1;
      }
    } else {
      MPI_Recv(&token, 1, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      token += 1;
      MPI_Send(&token, 1, MPI_INT, next, 7, MPI_COMM_WORLD);
    }
  }

  int sum = 0;
  int mine = rank + 1;
  MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (sum != size * (size + 1) / 2) {
    fprintf(stderr, "rank %d: allreduce gave %d, expected %d\n", rank, sum, size * (size + 1) / 2);
    failed = 1;
  }
  if (rank == 0 && !failed) printf("ring and allreduce ok\n");
  MPI_Finalize();
  return failed;
}
