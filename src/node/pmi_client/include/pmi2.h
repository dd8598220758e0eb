/* corral's PMI-2 client library (libpmi2.so): MPICH's PMI-2 interface over the PMI-2 wire
 * protocol, for programs and MPI libraries that load a PMI-2 library (Intel MPI's
 * I_MPI_PMI_LIBRARY, MPI libraries built against Slurm's libpmi2). Names, argument lists
 * and return codes are the interface's own. Under corral it talks to the node agent's PMI
 * server over PMI_FD; started outside a corral step it is a singleton (rank 0 of 1).
 * See docs/user.md, "MPI". */
#ifndef CORRAL_PMI2_H
#define CORRAL_PMI2_H

#ifdef __cplusplus
extern "C" {
#endif

#define PMI2_SUCCESS 0
#define PMI2_FAIL -1
#define PMI2_ERR_INIT 1
#define PMI2_ERR_NOMEM 2
#define PMI2_ERR_INVALID_ARG 3
#define PMI2_ERR_INVALID_KEY 4
#define PMI2_ERR_INVALID_KEY_LENGTH 5
#define PMI2_ERR_INVALID_VAL 6
#define PMI2_ERR_INVALID_VAL_LENGTH 7
#define PMI2_ERR_INVALID_LENGTH 8
#define PMI2_ERR_INVALID_NUM_ARGS 9
#define PMI2_ERR_INVALID_ARGS 10
#define PMI2_ERR_INVALID_NUM_PARSED 11
#define PMI2_ERR_INVALID_KEYVALP 12
#define PMI2_ERR_INVALID_SIZE 13
#define PMI2_ERR_OTHER 14

#define PMI2_MAX_KEYLEN 64
#define PMI2_MAX_VALLEN 1024
#define PMI2_MAX_ATTRVALUE 1024
#define PMI2_ID_NULL -1

typedef struct PMI2_Connect_comm {
  int (*read)(void *buf, int maxlen, void *ctx);
  int (*write)(const void *buf, int len, void *ctx);
  void *ctx;
  int isMaster;
} PMI2_Connect_comm_t;

typedef struct MPID_Info MPID_Info;

int PMI2_Init(int *spawned, int *size, int *rank, int *appnum);
int PMI2_Finalize(void);
int PMI2_Initialized(void);
int PMI2_Abort(int flag, const char msg[]);

int PMI2_Job_GetId(char jobid[], int jobid_size);
int PMI2_Job_GetRank(int *rank);
int PMI2_Info_GetSize(int *size);

int PMI2_KVS_Put(const char key[], const char value[]);
int PMI2_KVS_Fence(void);
/* vallen: the value's length, or minus the length it needed when maxvalue was too small. */
int PMI2_KVS_Get(const char *jobid, int src_pmi_id, const char key[], char value[], int maxvalue, int *vallen);

int PMI2_Info_GetNodeAttr(const char name[], char value[], int valuelen, int *found, int waitfor);
int PMI2_Info_GetNodeAttrIntArray(const char name[], int array[], int arraylen, int *outlen, int *found);
int PMI2_Info_PutNodeAttr(const char name[], const char value[]);
int PMI2_Info_GetJobAttr(const char name[], char value[], int valuelen, int *found);
int PMI2_Info_GetJobAttrIntArray(const char name[], int array[], int arraylen, int *outlen, int *found);

/* Not served by corral (no dynamic processes, no name service): they return PMI2_FAIL. */
int PMI2_Job_Spawn(int count, const char *cmds[], int argcs[], const char **argvs[], const int maxprocs[],
                   const int info_keyval_sizes[], const MPID_Info *info_keyval_vectors[], int preput_keyval_size,
                   const MPID_Info *preput_keyval_vector[], char jobId[], int jobIdSize, int errors[]);
int PMI2_Job_Connect(const char jobid[], PMI2_Connect_comm_t *conn);
int PMI2_Job_Disconnect(const char jobid[]);
int PMI2_Nameserv_publish(const char service_name[], const MPID_Info *info_ptr, const char port[]);
int PMI2_Nameserv_lookup(const char service_name[], const MPID_Info *info_ptr, char port[], int portLen);
int PMI2_Nameserv_unpublish(const char service_name[], const MPID_Info *info_ptr);

#ifdef __cplusplus
}
#endif

#endif /* CORRAL_PMI2_H */
