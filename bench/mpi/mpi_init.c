/* What an MPI start-up costs: MPI_Init, one barrier, MPI_Finalize. Rank 0 prints the
 * size it saw, so a run that started singletons is told apart from one that did not. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("size %d\n", size);
  MPI_Finalize();
  return 0;
}
