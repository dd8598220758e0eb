/* A PMIx client for corral's PMIx server tests, written against OpenPMIx's client API:
 * it prints its rank, the job size and its local peers, puts a key, commits, and takes
 * part in a fence over its whole namespace with data collection. With the argument
 * "get" it then reads the key of the rank next to it (rank ^ 1); with "die", rank 1 exits
 * with code 5 right after PMIx_Init, without PMIx_Finalize. Exit codes: 0 done, 2
 * PMIx_Init failed, 3 the fence failed, 4 the get failed. */
#include <pmix.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  pmix_proc_t me;
  pmix_status_t rc = PMIx_Init(&me, NULL, 0);
  if (rc != PMIX_SUCCESS) {
    fprintf(stderr, "PMIx_Init: %s\n", PMIx_Error_string(rc));
    return 2;
  }
  pmix_proc_t job;
  PMIX_PROC_LOAD(&job, me.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t *v = NULL;
  unsigned size = 0;
  if (PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &v) == PMIX_SUCCESS) {
    size = v->data.uint32;
    PMIX_VALUE_RELEASE(v);
  }
  char peers[256] = "";
  if (PMIx_Get(&job, PMIX_LOCAL_PEERS, NULL, 0, &v) == PMIX_SUCCESS) {
    snprintf(peers, sizeof peers, "%s", v->data.string);
    PMIX_VALUE_RELEASE(v);
  }
  printf("rank %u of %u in %s, local peers %s\n", me.rank, size, me.nspace, peers);
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "die") == 0 && me.rank == 1) _exit(5);

  char text[64];
  snprintf(text, sizeof text, "from-%u", me.rank);
  pmix_value_t put;
  PMIX_VALUE_LOAD(&put, text, PMIX_STRING);
  PMIx_Put(PMIX_GLOBAL, "corral.test", &put);
  PMIX_VALUE_DESTRUCT(&put);
  PMIx_Commit();

  pmix_info_t collect;
  bool yes = true;
  PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
  rc = PMIx_Fence(NULL, 0, &collect, 1);
  PMIX_INFO_DESTRUCT(&collect);
  if (rc != PMIX_SUCCESS) {
    fprintf(stderr, "PMIx_Fence: %s\n", PMIx_Error_string(rc));
    PMIx_Finalize(NULL, 0);
    return 3;
  }
  printf("rank %u: fence ok\n", me.rank);
  if (argc > 1 && strcmp(argv[1], "get") == 0) {
    pmix_proc_t other;
    PMIX_PROC_LOAD(&other, me.nspace, me.rank ^ 1u);
    rc = PMIx_Get(&other, "corral.test", NULL, 0, &v);
    if (rc != PMIX_SUCCESS) {
      fprintf(stderr, "PMIx_Get of rank %u: %s\n", other.rank, PMIx_Error_string(rc));
      PMIx_Finalize(NULL, 0);
      return 4;
    }
    printf("rank %u: rank %u says %s\n", me.rank, other.rank, v->data.string);
    PMIX_VALUE_RELEASE(v);
  }
  fflush(stdout);
  PMIx_Finalize(NULL, 0);
  return 0;
}
