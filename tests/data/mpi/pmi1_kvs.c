/* A PMI-1 client built against corral's pmi.h and libpmi.so: every rank puts a key,
 * meets the others at a barrier and reads its right neighbour's key; rank 0 also asks
 * for a key nobody put. Prints "rank R of S clique N: a,b,... got value-X". */
#include <pmi.h>
#include <stdio.h>
#include <string.h>

static int check(int rc, const char *what) {
  if (rc != PMI_SUCCESS) fprintf(stderr, "%s failed: %d\n", what, rc);
  return rc != PMI_SUCCESS;
}

int main(void) {
  int spawned = 0, rank = -1, size = 0, max_name = 0, max_key = 0, max_value = 0, clique = 0;
  if (check(PMI_Init(&spawned), "PMI_Init") || check(PMI_Get_rank(&rank), "PMI_Get_rank") ||
      check(PMI_Get_size(&size), "PMI_Get_size") || check(PMI_KVS_Get_name_length_max(&max_name), "name max") ||
      check(PMI_KVS_Get_key_length_max(&max_key), "key max") ||
      check(PMI_KVS_Get_value_length_max(&max_value), "value max") ||
      check(PMI_Get_clique_size(&clique), "PMI_Get_clique_size"))
    return 1;
  char kvs[256], key[64], value[512], got[512];
  int ranks[256];
  if (max_name > (int)sizeof kvs || clique > 256 || check(PMI_KVS_Get_my_name(kvs, sizeof kvs), "my name") ||
      check(PMI_Get_clique_ranks(ranks, clique), "PMI_Get_clique_ranks"))
    return 1;
  snprintf(key, sizeof key, "key-%d", rank);
  snprintf(value, sizeof value, "value-%d", rank);
  /* Spaces (Open MPI pads its base64 with them) and '%' survive the wire. */
  if (check(PMI_KVS_Put(kvs, "spaced", " 100% two  words  "), "PMI_KVS_Put spaced")) return 1;
  if (check(PMI_KVS_Put(kvs, key, value), "PMI_KVS_Put") || check(PMI_KVS_Commit(kvs), "PMI_KVS_Commit") ||
      check(PMI_Barrier(), "PMI_Barrier"))
    return 1;
  snprintf(key, sizeof key, "key-%d", (rank + 1) % size);
  if (check(PMI_KVS_Get(kvs, key, got, sizeof got), "PMI_KVS_Get")) return 1;
  char spaced[64];
  if (check(PMI_KVS_Get(kvs, "spaced", spaced, sizeof spaced), "PMI_KVS_Get spaced") ||
      strcmp(spaced, " 100% two  words  ") != 0)
    return 4;
  /* Refused by the library itself: a key with '=' or a space cannot cross the wire. */
  if (PMI_KVS_Put(kvs, "bad=key", "x") != PMI_ERR_INVALID_KEY) return 2;
  if (rank == 0 && PMI_KVS_Get(kvs, "nobody-put-this", got + 256, 256) == PMI_SUCCESS) return 3;
  printf("rank %d of %d clique %d:", rank, size, clique);
  for (int i = 0; i < clique; ++i) printf("%s%d", i ? "," : " ", ranks[i]);
  printf(" got %s\n", got);
  fflush(stdout);
  return check(PMI_Finalize(), "PMI_Finalize");
}
