// libpmi.so: MPICH's PMI-1 interface (include/pmi.h) over the PMI-1 wire protocol.
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "include/pmi.h"
#include "pmi_wire_client.h"

#define PMI_EXPORT extern "C" __attribute__((visibility("default")))

namespace corral::pmi_client {
namespace {

constexpr const char* kLib = "libpmi";

// The interface is a set of free functions over one connection per process, so the
// library's state is one object per process, reached only through this function.
struct Pmi1 {
  std::mutex mu;
  bool initialized = false;
  TaskEnv env;
  std::unique_ptr<WireClient> wire;  // null: a singleton
  std::string kvsname;
  int appnum = 0, universe = 1;
  int kvsname_max = 256, key_max = 64, value_max = 512;
  std::map<std::string, std::string> own;  // a singleton's keys
  std::vector<int> clique;                 // empty until asked for
};

Pmi1& state() {
  static Pmi1 s;
  return s;
}

// One request; null (after saying why) if the socket failed or the server refused it.
std::optional<Fields> call(Pmi1& s, const std::string& line, const char* what) {
  return checked(s.wire->call_v1(line), kLib, what);
}

int init(Pmi1& s) {
  std::string error;
  auto env = read_task_env(error);
  if (!env) {
    complain(kLib, error);
    return PMI_ERR_INIT;
  }
  s.env = *env;
  if (s.env.fd < 0) {  // not started by corral: a job of one
    s.kvsname = "singleton_kvs_" + std::to_string(::getpid());
    s.initialized = true;
    return PMI_SUCCESS;
  }
  s.wire = std::make_unique<WireClient>(s.env.fd);
  auto hello = call(s, "cmd=init pmi_version=1 pmi_subversion=1\n", "PMI init");
  auto maxes = hello ? call(s, "cmd=get_maxes\n", "PMI get_maxes") : std::nullopt;
  auto name = maxes ? call(s, "cmd=get_my_kvsname\n", "PMI get_my_kvsname") : std::nullopt;
  auto appnum = name ? call(s, "cmd=get_appnum\n", "PMI get_appnum") : std::nullopt;
  auto universe = appnum ? call(s, "cmd=get_universe_size\n", "PMI get_universe_size") : std::nullopt;
  if (!universe || !field(*name, "kvsname")) {
    s.wire.reset();
    return PMI_ERR_INIT;
  }
  s.kvsname = *field(*name, "kvsname");
  s.kvsname_max = int_field(*maxes, "kvsname_max", s.kvsname_max);
  s.key_max = int_field(*maxes, "keylen_max", s.key_max);
  s.value_max = int_field(*maxes, "vallen_max", s.value_max);
  s.appnum = int_field(*appnum, "appnum", 0);
  s.universe = int_field(*universe, "size", s.env.size);
  s.initialized = true;
  return PMI_SUCCESS;
}

// Runs `body` under the lock once PMI_Init has succeeded.
template <typename F>
int with_state(F&& body) {
  Pmi1& s = state();
  std::lock_guard lock(s.mu);
  if (!s.initialized) return PMI_ERR_INIT;
  return body(s);
}

int give_int(int* out, int value) {
  if (out == nullptr) return PMI_ERR_INVALID_ARG;
  *out = value;
  return PMI_SUCCESS;
}

int give_text(const std::string& value, char* buffer, int length) {
  if (buffer == nullptr) return PMI_ERR_INVALID_ARG;
  return copy_out(value, buffer, length) ? PMI_SUCCESS : PMI_ERR_INVALID_LENGTH;
}

bool own_kvs(const Pmi1& s, const char* kvsname) { return kvsname != nullptr && s.kvsname == kvsname; }

std::optional<std::string> get_value(Pmi1& s, const std::string& key, bool quiet) {
  if (!s.wire) {
    auto it = s.own.find(key);
    return it == s.own.end() ? std::nullopt : std::optional(it->second);
  }
  auto reply = s.wire->call_v1("cmd=get kvsname=" + s.kvsname + " key=" + key + "\n");
  if (!reply) {
    complain(kLib, "PMI_KVS_Get: the connection to corral's PMI server was lost");
    return std::nullopt;
  }
  const std::string* value = field(*reply, "value");
  if (int_field(*reply, "rc", -1) != 0 || !value) {
    if (!quiet) complain(kLib, "PMI_KVS_Get: no key '" + key + "' in this step's key-value space");
    return std::nullopt;
  }
  return decode_value(*value);
}

// What a program may put: the server's limit less what encoding a value may add.
int program_value_max(const Pmi1& s) { return s.wire ? s.value_max - kEncodingRoom : s.value_max; }

const std::vector<int>& clique(Pmi1& s) {
  if (s.clique.empty()) {
    auto mapping = get_value(s, "PMI_process_mapping", true);
    s.clique = ranks_on_node_of(mapping ? expand_process_mapping(*mapping, s.env.size) : std::vector<int>{},
                                s.env.rank);
  }
  return s.clique;
}

}  // namespace
}  // namespace corral::pmi_client

using namespace corral::pmi_client;

PMI_EXPORT int PMI_Init(int* spawned) {
  if (spawned == nullptr) return PMI_ERR_INVALID_ARG;
  Pmi1& s = state();
  std::lock_guard lock(s.mu);
  *spawned = PMI_FALSE;  // corral starts no processes for PMI_Spawn_multiple
  return s.initialized ? PMI_SUCCESS : init(s);
}

PMI_EXPORT int PMI_Initialized(PMI_BOOL* initialized) {
  if (initialized == nullptr) return PMI_ERR_INVALID_ARG;
  Pmi1& s = state();
  std::lock_guard lock(s.mu);
  *initialized = s.initialized ? PMI_TRUE : PMI_FALSE;
  return PMI_SUCCESS;
}

PMI_EXPORT int PMI_Finalize(void) {
  return with_state([](Pmi1& s) {
    int rc = PMI_SUCCESS;
    if (s.wire && !call(s, "cmd=finalize\n", "PMI finalize")) rc = PMI_FAIL;
    s.wire.reset();
    s.initialized = false;
    return rc;
  });
}

PMI_EXPORT int PMI_Abort(int exit_code, const char error_msg[]) {
  Pmi1& s = state();
  {
    std::lock_guard lock(s.mu);
    if (s.wire) {
      // The message goes last: the server reads words without '=' as part of it.
      std::string message = error_msg ? error_msg : "";
      for (char& c : message)
        if (c == '=' || static_cast<unsigned char>(c) < ' ') c = ' ';
      (void)s.wire->send("cmd=abort exitcode=" + std::to_string(exit_code) + " message=" + message.substr(0, 512) +
                         "\n");
    } else if (error_msg) {
      complain(kLib, std::string("PMI_Abort: ") + error_msg);
    }
  }
  std::exit(exit_code);
}

PMI_EXPORT int PMI_Get_size(int* size) {
  return with_state([&](Pmi1& s) { return give_int(size, s.env.size); });
}

PMI_EXPORT int PMI_Get_rank(int* rank) {
  return with_state([&](Pmi1& s) { return give_int(rank, s.env.rank); });
}

PMI_EXPORT int PMI_Get_universe_size(int* size) {
  return with_state([&](Pmi1& s) { return give_int(size, s.universe); });
}

PMI_EXPORT int PMI_Get_appnum(int* appnum) {
  return with_state([&](Pmi1& s) { return give_int(appnum, s.appnum); });
}

PMI_EXPORT int PMI_Get_id(char id_str[], int length) {
  return with_state([&](Pmi1& s) { return give_text(s.kvsname, id_str, length); });
}

PMI_EXPORT int PMI_Get_kvs_domain_id(char id_str[], int length) { return PMI_Get_id(id_str, length); }

PMI_EXPORT int PMI_Get_id_length_max(int* length) {
  return with_state([&](Pmi1& s) { return give_int(length, s.kvsname_max); });
}

PMI_EXPORT int PMI_Get_clique_size(int* size) {
  return with_state([&](Pmi1& s) { return give_int(size, static_cast<int>(clique(s).size())); });
}

PMI_EXPORT int PMI_Get_clique_ranks(int ranks[], int length) {
  return with_state([&](Pmi1& s) {
    const auto& c = clique(s);
    if (ranks == nullptr || length < static_cast<int>(c.size())) return PMI_ERR_INVALID_LENGTH;
    for (std::size_t i = 0; i < c.size(); ++i) ranks[i] = c[i];
    return PMI_SUCCESS;
  });
}

PMI_EXPORT int PMI_Barrier(void) {
  return with_state([](Pmi1& s) {
    if (!s.wire) return PMI_SUCCESS;
    return call(s, "cmd=barrier_in\n", "PMI barrier") ? PMI_SUCCESS : PMI_FAIL;
  });
}

PMI_EXPORT int PMI_KVS_Get_my_name(char kvsname[], int length) {
  return with_state([&](Pmi1& s) { return give_text(s.kvsname, kvsname, length); });
}

PMI_EXPORT int PMI_KVS_Get_name_length_max(int* length) {
  return with_state([&](Pmi1& s) { return give_int(length, s.kvsname_max); });
}

PMI_EXPORT int PMI_KVS_Get_key_length_max(int* length) {
  return with_state([&](Pmi1& s) { return give_int(length, s.key_max); });
}

PMI_EXPORT int PMI_KVS_Get_value_length_max(int* length) {
  return with_state([&](Pmi1& s) { return give_int(length, program_value_max(s)); });
}

PMI_EXPORT int PMI_KVS_Put(const char kvsname[], const char key[], const char value[]) {
  return with_state([&](Pmi1& s) {
    if (!own_kvs(s, kvsname)) return PMI_ERR_INVALID_ARG;
    if (key == nullptr || !wire_word(key, true)) return PMI_ERR_INVALID_KEY;
    if (value == nullptr) return PMI_ERR_INVALID_VAL;
    std::string k(key), v(value);
    if (static_cast<int>(k.size()) > s.key_max) return PMI_ERR_INVALID_KEY_LENGTH;
    if (static_cast<int>(v.size()) > program_value_max(s)) return PMI_ERR_INVALID_VAL_LENGTH;
    if (!s.wire) {
      s.own[k] = v;
      return PMI_SUCCESS;
    }
    std::string wire_value = encode_value(v, false);
    if (static_cast<int>(wire_value.size()) > s.value_max) return PMI_ERR_INVALID_VAL_LENGTH;
    return call(s, "cmd=put kvsname=" + s.kvsname + " key=" + k + " value=" + wire_value + "\n", "PMI_KVS_Put")
               ? PMI_SUCCESS
               : PMI_FAIL;
  });
}

// Puts reach the server at once and every rank's are shared at the next barrier.
PMI_EXPORT int PMI_KVS_Commit(const char kvsname[]) {
  return with_state([&](Pmi1& s) { return own_kvs(s, kvsname) ? PMI_SUCCESS : PMI_ERR_INVALID_ARG; });
}

PMI_EXPORT int PMI_KVS_Get(const char kvsname[], const char key[], char value[], int length) {
  return with_state([&](Pmi1& s) {
    if (!own_kvs(s, kvsname)) return PMI_ERR_INVALID_ARG;
    if (key == nullptr || !wire_word(key, true)) return PMI_ERR_INVALID_KEY;
    auto v = get_value(s, key, false);
    if (!v) return PMI_FAIL;
    return give_text(*v, value, length);
  });
}

PMI_EXPORT int PMI_KVS_Create(char[], int) { return PMI_FAIL; }
PMI_EXPORT int PMI_KVS_Destroy(const char[]) { return PMI_FAIL; }
PMI_EXPORT int PMI_KVS_Iter_first(const char[], char[], int, char[], int) { return PMI_FAIL; }
PMI_EXPORT int PMI_KVS_Iter_next(const char[], char[], int, char[], int) { return PMI_FAIL; }
PMI_EXPORT int PMI_Publish_name(const char[], const char[]) { return PMI_FAIL; }
PMI_EXPORT int PMI_Unpublish_name(const char[]) { return PMI_FAIL; }
PMI_EXPORT int PMI_Lookup_name(const char[], char[]) { return PMI_FAIL; }
PMI_EXPORT int PMI_Spawn_multiple(int, const char*[], const char**[], const int[], const int[], const PMI_keyval_t*[],
                                  int, const PMI_keyval_t[], int[]) {
  return PMI_FAIL;
}
PMI_EXPORT int PMI_Parse_option(int, char*[], int*, PMI_keyval_t**, int*) { return PMI_FAIL; }
PMI_EXPORT int PMI_Args_to_keyval(int*, char*((*)[]), PMI_keyval_t**, int*) { return PMI_FAIL; }
PMI_EXPORT int PMI_Free_keyvals(PMI_keyval_t[], int) { return PMI_FAIL; }
PMI_EXPORT int PMI_Get_options(char*, int*) { return PMI_FAIL; }
