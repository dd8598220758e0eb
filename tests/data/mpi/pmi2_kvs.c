/* A PMI-2 client built against corral's pmi2.h and libpmi2.so: every rank puts a key,
 * fences, reads its right neighbour's key; the job's process mapping is read as a job
 * attribute, and rank 0 of each node publishes a node attribute the others wait for.
 * Prints "rank R of S job J got value-X node N mapping M". */
#include <pmi2.h>
#include <stdio.h>
#include <string.h>

static int check(int rc, const char *what) {
  if (rc != PMI2_SUCCESS) fprintf(stderr, "%s failed: %d\n", what, rc);
  return rc != PMI2_SUCCESS;
}

int main(int argc, char **argv) {
  int spawned = 0, size = 0, rank = -1, appnum = -1, found = 0, len = 0;
  char jobid[256], key[PMI2_MAX_KEYLEN], value[PMI2_MAX_VALLEN], got[PMI2_MAX_VALLEN], mapping[PMI2_MAX_VALLEN];
  char node[PMI2_MAX_VALLEN];
  if (check(PMI2_Init(&spawned, &size, &rank, &appnum), "PMI2_Init") || !PMI2_Initialized() ||
      check(PMI2_Job_GetId(jobid, sizeof jobid), "PMI2_Job_GetId"))
    return 1;
  if (argc > 1 && strcmp(argv[1], "abort") == 0 && rank == size - 1) PMI2_Abort(1, "rank gives up; on purpose");
  snprintf(key, sizeof key, "key-%d", rank);
  snprintf(value, sizeof value, "value-%d", rank);
  if (check(PMI2_KVS_Put(key, value), "PMI2_KVS_Put") || check(PMI2_KVS_Fence(), "PMI2_KVS_Fence")) return 1;
  snprintf(key, sizeof key, "key-%d", (rank + 1) % size);
  if (check(PMI2_KVS_Get(jobid, PMI2_ID_NULL, key, got, sizeof got, &len), "PMI2_KVS_Get") ||
      len != (int)strlen(got))
    return 1;
  if (check(PMI2_Info_GetJobAttr("PMI_process_mapping", mapping, sizeof mapping, &found), "job attr")) return 1;
  if (!found) strcpy(mapping, "none");
  /* The first rank on each node (by the mapping's blocks, here: even ranks of 2 per node)
   * publishes; the rest wait for it. */
  if (rank % 2 == 0) {
    snprintf(value, sizeof value, "from-%d", rank);
    if (check(PMI2_Info_PutNodeAttr("corral-test", value), "PMI2_Info_PutNodeAttr")) return 1;
  }
  if (check(PMI2_Info_GetNodeAttr("corral-test", node, sizeof node, &found, 1), "PMI2_Info_GetNodeAttr") || !found)
    return 1;
#ifndef OTHER_PMI2_LIBRARY /* corral's library refuses what its wire cannot carry */
  if (PMI2_KVS_Put("bad;key", "x") != PMI2_ERR_INVALID_KEY) return 2;
#endif
  printf("rank %d of %d job %s got %s node %s mapping %s\n", rank, size, strlen(jobid) ? "set" : "empty", got,
         node, mapping);
  fflush(stdout);
  return check(PMI2_Finalize(), "PMI2_Finalize");
}
