/* What Cray PMI reads at start-up under --mpi=cray-pals, read the way a C program that
 * declares the apinfo format's structures (version 5) reads it: the header, then this
 * rank's PE, its node and the command. Prints one line per rank:
 * "rank R of P node N/M host H local L ppn X cpus C ports=... secret=yes spool=writable"
 * and exits non-zero, naming the problem, when the file and the variables disagree. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  int version;
  size_t total_size;
  size_t comm_profile_size, comm_profile_offset;
  int ncomm_profiles;
  size_t cmd_size, cmd_offset;
  int ncmds;
  size_t pe_size, pe_offset;
  int npes;
  size_t node_size, node_offset;
  int nnodes;
  size_t nic_size, nic_offset;
  int nnics;
  size_t status_offset;
  size_t dist_size, dist_offset;
} header_t;
typedef struct {
  int npes, pes_per_node, cpus_per_pe;
} cmd_t;
typedef struct {
  int localidx, cmdidx, nodeidx;
} pe_t;
typedef struct {
  int nid;
  char hostname[64];
} node_t;

static int fail(const char *what) {
  fprintf(stderr, "pals_reader: %s\n", what);
  return 1;
}

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v ? v : "";
}

int main(void) {
  const char *path = getenv("PALS_APINFO");
  if (!path) return fail("no PALS_APINFO");
  FILE *f = fopen(path, "rb");
  if (!f) return fail("cannot open PALS_APINFO");
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  header_t h;
  if (n < sizeof h) return fail("short file");
  memcpy(&h, buf, sizeof h);
  if (h.version != 5 || h.total_size != n) return fail("bad version or total_size");
  if (h.cmd_size != sizeof(cmd_t) || h.pe_size != sizeof(pe_t) || h.node_size != sizeof(node_t))
    return fail("section sizes differ from the structures'");
  if (h.ncmds != 1 || h.ncomm_profiles != 0 || h.nnics != 0) return fail("unexpected section counts");
  int rank = atoi(env("PALS_RANKID")), nodeid = atoi(env("PALS_NODEID"));
  if (rank < 0 || rank >= h.npes || nodeid < 0 || nodeid >= h.nnodes) return fail("rank or node outside the file");
  pe_t pe;
  node_t node;
  cmd_t cmd;
  memcpy(&pe, buf + h.pe_offset + (size_t)rank * h.pe_size, sizeof pe);
  memcpy(&node, buf + h.node_offset + (size_t)pe.nodeidx * h.node_size, sizeof node);
  memcpy(&cmd, buf + h.cmd_offset, sizeof cmd);
  if (pe.nodeidx != nodeid || node.nid != nodeid) return fail("PALS_NODEID disagrees with the file");
  if (cmd.npes != h.npes) return fail("the command's npes disagrees with the header's");
  /* Cray PMI keeps files of its own in the spool directory. */
  char probe[4096];
  snprintf(probe, sizeof probe, "%s/rank-%d", env("PALS_SPOOL_DIR"), rank);
  FILE *w = fopen(probe, "w");
  if (!w) return fail("cannot write in PALS_SPOOL_DIR");
  fclose(w);
  printf("rank %d of %d node %d/%d host %s local %d ppn %d cpus %d ports=%s secret=%s apid=%s\n", rank, h.npes,
         nodeid, h.nnodes, node.hostname, pe.localidx, cmd.pes_per_node, cmd.cpus_per_pe, env("PMI_CONTROL_PORT"),
         strlen(env("PMI_SHARED_SECRET")) > 0 ? "yes" : "no", env("PALS_APID"));
  return 0;
}
