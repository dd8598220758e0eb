/* corral's PMI-1 client library (libpmi.so): the process management interface MPICH
 * defined, for programs and MPI libraries that load a PMI library instead of speaking the
 * wire protocol themselves. The names, argument lists and return codes are the interface's
 * own, so a program built against another implementation's pmi.h runs with this library.
 * Under corral it talks to the node agent's PMI server over PMI_FD (`--mpi=pmi1` or
 * `pmi2`); started outside a corral step it is a singleton (rank 0 of 1).
 * See docs/user.md, "MPI". */
#ifndef CORRAL_PMI_H
#define CORRAL_PMI_H

#ifdef __cplusplus
extern "C" {
#endif

#define PMI_SUCCESS 0
#define PMI_FAIL -1
#define PMI_ERR_INIT 1
#define PMI_ERR_NOMEM 2
#define PMI_ERR_INVALID_ARG 3
#define PMI_ERR_INVALID_KEY 4
#define PMI_ERR_INVALID_KEY_LENGTH 5
#define PMI_ERR_INVALID_VAL 6
#define PMI_ERR_INVALID_VAL_LENGTH 7
#define PMI_ERR_INVALID_LENGTH 8
#define PMI_ERR_INVALID_NUM_ARGS 9
#define PMI_ERR_INVALID_ARGS 10
#define PMI_ERR_INVALID_NUM_PARSED 11
#define PMI_ERR_INVALID_KEYVALP 12
#define PMI_ERR_INVALID_SIZE 13

typedef int PMI_BOOL;
#define PMI_TRUE 1
#define PMI_FALSE 0

typedef struct PMI_keyval_t {
  const char *key;
  char *val;
} PMI_keyval_t;

int PMI_Init(int *spawned);
int PMI_Initialized(PMI_BOOL *initialized);
int PMI_Finalize(void);
int PMI_Abort(int exit_code, const char error_msg[]);

int PMI_Get_size(int *size);
int PMI_Get_rank(int *rank);
int PMI_Get_universe_size(int *size);
int PMI_Get_appnum(int *appnum);
int PMI_Get_id(char id_str[], int length);
int PMI_Get_kvs_domain_id(char id_str[], int length);
int PMI_Get_id_length_max(int *length);
/* The ranks on this node ("clique"), from the step's process mapping. */
int PMI_Get_clique_size(int *size);
int PMI_Get_clique_ranks(int ranks[], int length);

int PMI_Barrier(void);

int PMI_KVS_Get_my_name(char kvsname[], int length);
int PMI_KVS_Get_name_length_max(int *length);
int PMI_KVS_Get_key_length_max(int *length);
int PMI_KVS_Get_value_length_max(int *length);
int PMI_KVS_Create(char kvsname[], int length);
int PMI_KVS_Destroy(const char kvsname[]);
int PMI_KVS_Put(const char kvsname[], const char key[], const char value[]);
int PMI_KVS_Commit(const char kvsname[]);
int PMI_KVS_Get(const char kvsname[], const char key[], char value[], int length);
int PMI_KVS_Iter_first(const char kvsname[], char key[], int key_len, char val[], int val_len);
int PMI_KVS_Iter_next(const char kvsname[], char key[], int key_len, char val[], int val_len);

/* Not served by corral (no dynamic processes, no name service): they return PMI_FAIL. */
int PMI_Publish_name(const char service_name[], const char port[]);
int PMI_Unpublish_name(const char service_name[]);
int PMI_Lookup_name(const char service_name[], char port[]);
int PMI_Spawn_multiple(int count, const char *cmds[], const char **argvs[], const int maxprocs[],
                       const int info_keyval_sizesp[], const PMI_keyval_t *info_keyval_vectors[],
                       int preput_keyval_size, const PMI_keyval_t preput_keyval_vector[], int errors[]);
int PMI_Parse_option(int num_args, char *args[], int *num_parsed, PMI_keyval_t **keyvalp, int *size);
int PMI_Args_to_keyval(int *argcp, char *((*argvp)[]), PMI_keyval_t **keyvalp, int *size);
int PMI_Free_keyvals(PMI_keyval_t keyvalp[], int size);
int PMI_Get_options(char *str, int *length);

#ifdef __cplusplus
}
#endif

#endif /* CORRAL_PMI_H */
