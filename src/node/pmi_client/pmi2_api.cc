// libpmi2.so: MPICH's PMI-2 interface (include/pmi2.h) over the PMI-2 wire protocol.
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "include/pmi2.h"
#include "pmi_wire_client.h"

#define PMI2_EXPORT extern "C" __attribute__((visibility("default")))

namespace corral::pmi_client {
namespace {

constexpr const char* kLib = "libpmi2";

// One connection per process: the library's state is one object, reached only here.
struct Pmi2 {
  std::mutex mu;
  bool initialized = false;
  TaskEnv env;
  std::unique_ptr<WireClient> wire;  // null: a singleton
  int appnum = 0;
  std::string jobid;                        // asked for once
  std::map<std::string, std::string> own;   // a singleton's keys and node attributes
};

Pmi2& state() {
  static Pmi2 s;
  return s;
}

std::optional<Fields> call(Pmi2& s, const std::string& message, const char* what) {
  auto reply = s.wire->call_v2(message);
  if (reply)
    for (auto& [k, v] : *reply)
      if (k == "value") v = decode_value(v);
  return checked(std::move(reply), kLib, what);
}

int init(Pmi2& s) {
  std::string error;
  auto env = read_task_env(error);
  if (!env) {
    complain(kLib, error);
    return PMI2_ERR_INIT;
  }
  s.env = *env;
  if (s.env.fd < 0) {
    s.jobid = "singleton_" + std::to_string(::getpid());
    s.initialized = true;
    return PMI2_SUCCESS;
  }
  s.wire = std::make_unique<WireClient>(s.env.fd);
  // The version is asked in PMI-1's wire; everything after it is PMI-2's.
  auto hello = s.wire->call_v1("cmd=init pmi_version=2 pmi_subversion=0\n");
  if (!hello || int_field(*hello, "rc", -1) != 0 || int_field(*hello, "pmi_version", 0) != 2) {
    complain(kLib, "corral's PMI server did not accept PMI version 2.0");
    s.wire.reset();
    return PMI2_ERR_INIT;
  }
  auto full = call(s, "cmd=fullinit;pmirank=" + std::to_string(s.env.rank) + ";", "PMI2_Init");
  if (!full) {
    s.wire.reset();
    return PMI2_ERR_INIT;
  }
  s.env.size = int_field(*full, "size", s.env.size);
  s.appnum = int_field(*full, "appnum", 0);
  s.initialized = true;
  return PMI2_SUCCESS;
}

template <typename F>
int with_state(F&& body) {
  Pmi2& s = state();
  std::lock_guard lock(s.mu);
  if (!s.initialized) return PMI2_ERR_INIT;
  return body(s);
}

// PMI-2 values end at ';' and the wire has no escape for it.
bool v2_word(const char* text, std::size_t max) {
  if (text == nullptr) return false;
  std::string_view t(text);
  return !t.empty() && t.size() <= max && t.find(';') == std::string_view::npos &&
         t.find('\n') == std::string_view::npos;
}

// The value of a reply that says found=TRUE, else null; sets *found either way.
const std::string* found_value(const Fields& reply, int* found) {
  const std::string* f = field(reply, "found");
  const std::string* v = field(reply, "value");
  bool yes = f && *f == "TRUE" && v;
  if (found) *found = yes ? 1 : 0;
  return yes ? v : nullptr;
}

int give_value(const Fields& reply, char* value, int valuelen, int* found) {
  const std::string* v = found_value(reply, found);
  if (!v) return PMI2_SUCCESS;
  return copy_out(*v, value, valuelen) ? PMI2_SUCCESS : PMI2_ERR_INVALID_LENGTH;
}

// "1,2,3" into array; false if a word is not an integer.
bool parse_ints(const std::string& text, int* array, int arraylen, int* outlen) {
  int n = 0;
  std::size_t i = 0;
  while (i <= text.size() && !text.empty()) {
    std::size_t end = text.find(',', i);
    if (end == std::string::npos) end = text.size();
    int v = 0;
    auto [p, ec] = std::from_chars(text.data() + i, text.data() + end, v);
    if (ec != std::errc() || p != text.data() + end) return false;
    if (n < arraylen) array[n] = v;
    ++n;
    i = end + 1;
  }
  if (outlen) *outlen = n < arraylen ? n : arraylen;
  return true;
}

int give_ints(const Fields& reply, int* array, int arraylen, int* outlen, int* found) {
  const std::string* v = found_value(reply, found);
  if (!v) return PMI2_SUCCESS;
  return parse_ints(*v, array, arraylen, outlen) ? PMI2_SUCCESS : PMI2_ERR_INVALID_VAL;
}

// A key-value put or a node attribute (`command`); a singleton keeps it under `space`.
int put(Pmi2& s, const char* command, const char* space, const char* key, const char* value, const char* what) {
  if (!v2_word(key, PMI2_MAX_KEYLEN)) return PMI2_ERR_INVALID_KEY;
  if (value == nullptr) return PMI2_ERR_INVALID_VAL;
  if (std::string_view(value).size() > PMI2_MAX_VALLEN) return PMI2_ERR_INVALID_VAL_LENGTH;
  if (!s.wire) {
    s.own[std::string(space) + key] = value;
    return PMI2_SUCCESS;
  }
  std::string message = std::string("cmd=") + command + ";key=" + key + ";value=" + encode_value(value, true) + ";";
  return call(s, message, what) ? PMI2_SUCCESS : PMI2_FAIL;
}

std::optional<Fields> node_attr(Pmi2& s, const char* name, bool wait) {
  if (!s.wire) {
    auto it = s.own.find(std::string("node:") + name);
    if (it == s.own.end()) return Fields{{"found", "FALSE"}};
    return Fields{{"found", "TRUE"}, {"value", it->second}};
  }
  return call(s, std::string("cmd=info-getnodeattr;key=") + name + ";wait=" + (wait ? "TRUE" : "FALSE") + ";",
              "PMI2_Info_GetNodeAttr");
}

std::optional<Fields> job_attr(Pmi2& s, const char* name) {
  if (!s.wire) return Fields{{"found", "FALSE"}};
  return call(s, std::string("cmd=info-getjobattr;key=") + name + ";", "PMI2_Info_GetJobAttr");
}

}  // namespace
}  // namespace corral::pmi_client

using namespace corral::pmi_client;

PMI2_EXPORT int PMI2_Init(int* spawned, int* size, int* rank, int* appnum) {
  Pmi2& s = state();
  std::lock_guard lock(s.mu);
  int rc = s.initialized ? PMI2_SUCCESS : init(s);
  if (rc != PMI2_SUCCESS) return rc;
  if (spawned) *spawned = 0;
  if (size) *size = s.env.size;
  if (rank) *rank = s.env.rank;
  if (appnum) *appnum = s.appnum;
  return PMI2_SUCCESS;
}

PMI2_EXPORT int PMI2_Initialized(void) {
  Pmi2& s = state();
  std::lock_guard lock(s.mu);
  return s.initialized ? 1 : 0;
}

PMI2_EXPORT int PMI2_Finalize(void) {
  return with_state([](Pmi2& s) {
    int rc = PMI2_SUCCESS;
    if (s.wire && !call(s, "cmd=finalize;", "PMI2_Finalize")) rc = PMI2_FAIL;
    s.wire.reset();
    s.initialized = false;
    return rc;
  });
}

PMI2_EXPORT int PMI2_Abort(int flag, const char msg[]) {
  Pmi2& s = state();
  {
    std::lock_guard lock(s.mu);
    std::string message = msg ? msg : "";
    for (char& c : message)
      if (c == ';' || static_cast<unsigned char>(c) < ' ') c = ' ';
    if (s.wire)
      (void)s.wire->send(WireClient::frame_v2(std::string("cmd=abort;isworldabort=") + (flag ? "TRUE" : "FALSE") +
                                              ";msg=" + message.substr(0, 512) + ";"));
    else if (!message.empty())
      complain(kLib, "PMI2_Abort: " + message);
  }
  std::exit(1);
}

PMI2_EXPORT int PMI2_Job_GetId(char jobid[], int jobid_size) {
  return with_state([&](Pmi2& s) {
    if (s.jobid.empty()) {
      auto reply = call(s, "cmd=job-getid;", "PMI2_Job_GetId");
      if (!reply || !field(*reply, "jobid")) return PMI2_FAIL;
      s.jobid = *field(*reply, "jobid");
    }
    if (jobid == nullptr) return PMI2_ERR_INVALID_ARG;
    return copy_out(s.jobid, jobid, jobid_size) ? PMI2_SUCCESS : PMI2_ERR_INVALID_LENGTH;
  });
}

PMI2_EXPORT int PMI2_Job_GetRank(int* rank) {
  return with_state([&](Pmi2& s) {
    if (rank == nullptr) return PMI2_ERR_INVALID_ARG;
    *rank = s.env.rank;
    return PMI2_SUCCESS;
  });
}

PMI2_EXPORT int PMI2_Info_GetSize(int* size) {
  return with_state([&](Pmi2& s) {
    if (size == nullptr) return PMI2_ERR_INVALID_ARG;
    *size = s.env.size;
    return PMI2_SUCCESS;
  });
}

PMI2_EXPORT int PMI2_KVS_Put(const char key[], const char value[]) {
  return with_state([&](Pmi2& s) { return put(s, "kvs-put", "kvs:", key, value, "PMI2_KVS_Put"); });
}

PMI2_EXPORT int PMI2_KVS_Fence(void) {
  return with_state([](Pmi2& s) {
    if (!s.wire) return PMI2_SUCCESS;
    return call(s, "cmd=kvs-fence;", "PMI2_KVS_Fence") ? PMI2_SUCCESS : PMI2_FAIL;
  });
}

PMI2_EXPORT int PMI2_KVS_Get(const char* jobid, int src_pmi_id, const char key[], char value[], int maxvalue,
                             int* vallen) {
  return with_state([&](Pmi2& s) {
    if (!v2_word(key, PMI2_MAX_KEYLEN)) return PMI2_ERR_INVALID_KEY;
    if (value == nullptr || maxvalue < 1) return PMI2_ERR_INVALID_ARG;
    std::optional<Fields> reply;
    if (!s.wire) {
      auto it = s.own.find(std::string("kvs:") + key);
      reply = it == s.own.end() ? Fields{{"found", "FALSE"}} : Fields{{"found", "TRUE"}, {"value", it->second}};
    } else {
      std::string message = "cmd=kvs-get;";
      if (jobid && v2_word(jobid, 256)) message += std::string("jobid=") + jobid + ";";
      message += "srcid=" + std::to_string(src_pmi_id) + ";key=" + key + ";";
      reply = call(s, message, "PMI2_KVS_Get");
    }
    if (!reply) return PMI2_FAIL;
    const std::string* found = field(*reply, "found");
    const std::string* v = field(*reply, "value");
    if (!found || *found != "TRUE" || !v) return PMI2_FAIL;
    // Too long for the buffer: as much as fits, and minus the length it needed.
    int len = static_cast<int>(v->size());
    int copied = len < maxvalue ? len : maxvalue - 1;
    v->copy(value, static_cast<std::size_t>(copied));
    value[copied] = '\0';
    if (vallen) *vallen = len < maxvalue ? len : -len;
    return PMI2_SUCCESS;
  });
}

PMI2_EXPORT int PMI2_Info_GetNodeAttr(const char name[], char value[], int valuelen, int* found, int waitfor) {
  return with_state([&](Pmi2& s) {
    if (!v2_word(name, PMI2_MAX_KEYLEN)) return PMI2_ERR_INVALID_KEY;
    auto reply = node_attr(s, name, waitfor != 0);
    return reply ? give_value(*reply, value, valuelen, found) : PMI2_FAIL;
  });
}

PMI2_EXPORT int PMI2_Info_GetNodeAttrIntArray(const char name[], int array[], int arraylen, int* outlen, int* found) {
  return with_state([&](Pmi2& s) {
    if (!v2_word(name, PMI2_MAX_KEYLEN) || array == nullptr || arraylen < 0) return PMI2_ERR_INVALID_ARG;
    auto reply = node_attr(s, name, false);
    return reply ? give_ints(*reply, array, arraylen, outlen, found) : PMI2_FAIL;
  });
}

PMI2_EXPORT int PMI2_Info_PutNodeAttr(const char name[], const char value[]) {
  return with_state([&](Pmi2& s) { return put(s, "info-putnodeattr", "node:", name, value, "PMI2_Info_PutNodeAttr"); });
}

PMI2_EXPORT int PMI2_Info_GetJobAttr(const char name[], char value[], int valuelen, int* found) {
  return with_state([&](Pmi2& s) {
    if (!v2_word(name, PMI2_MAX_KEYLEN)) return PMI2_ERR_INVALID_KEY;
    auto reply = job_attr(s, name);
    return reply ? give_value(*reply, value, valuelen, found) : PMI2_FAIL;
  });
}

PMI2_EXPORT int PMI2_Info_GetJobAttrIntArray(const char name[], int array[], int arraylen, int* outlen, int* found) {
  return with_state([&](Pmi2& s) {
    if (!v2_word(name, PMI2_MAX_KEYLEN) || array == nullptr || arraylen < 0) return PMI2_ERR_INVALID_ARG;
    auto reply = job_attr(s, name);
    return reply ? give_ints(*reply, array, arraylen, outlen, found) : PMI2_FAIL;
  });
}

PMI2_EXPORT int PMI2_Job_Spawn(int, const char*[], int[], const char**[], const int[], const int[], const MPID_Info*[],
                               int, const MPID_Info*[], char[], int, int[]) {
  return PMI2_FAIL;
}
PMI2_EXPORT int PMI2_Job_Connect(const char[], PMI2_Connect_comm_t*) { return PMI2_FAIL; }
PMI2_EXPORT int PMI2_Job_Disconnect(const char[]) { return PMI2_FAIL; }
PMI2_EXPORT int PMI2_Nameserv_publish(const char[], const MPID_Info*, const char[]) { return PMI2_FAIL; }
PMI2_EXPORT int PMI2_Nameserv_lookup(const char[], const MPID_Info*, char[], int) { return PMI2_FAIL; }
PMI2_EXPORT int PMI2_Nameserv_unpublish(const char[], const MPID_Info*) { return PMI2_FAIL; }
