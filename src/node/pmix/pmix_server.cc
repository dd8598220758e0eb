#include "node/pmix/pmix_server.h"

#include <pmix.h>
#include <pmix_server.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <thread>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "job/hmac_key.h"
#include "node/pmix/pmix_info.h"

namespace corral::node {

namespace {

// A rank's share of what one fence may carry out of this agent, as the PMI-1 server
// allows each rank's puts: beyond it the fence fails instead of the agent's memory
// growing with what a program puts.
constexpr std::size_t kMaxFenceBytesPerRank = 4u << 20;
constexpr std::string_view kFenceKeyPrefix = "pmix.";
// Ranks of one namespace: the library's ranks are 32-bit, and every rank is described
// to it at registration; corral's own limit on a step's tasks is far below.
constexpr uint64_t kMaxPmixRanks = 1u << 22;

std::string status_text(pmix_status_t rc) { return std::string(PMIx_Error_string(rc)) + " (" + std::to_string(rc) + ")"; }

// How long the agent's loop waits for the library's thread to register a namespace or a
// client. It answers in microseconds; OpenPMIx 4.2's thread has been seen to stop for
// good (see pmix_namespace_name), and the agent must not stop with it.
constexpr auto kLibraryTimeout = std::chrono::seconds(10);

struct OpWait {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  pmix_status_t status = PMIX_SUCCESS;
};

// Starts an operation that answers through a pmix_op_cbfunc_t and waits for its answer
// at most kLibraryTimeout. After a timeout the callback may still come: it owns its
// share of the wait, so nothing it touches is gone.
Status wait_for_library(const std::function<pmix_status_t(pmix_op_cbfunc_t, void*)>& start, const std::string& what) {
  auto wait = std::make_shared<OpWait>();
  auto share = std::make_unique<std::shared_ptr<OpWait>>(wait);
  pmix_op_cbfunc_t answered = [](pmix_status_t status, void* cbdata) {
    std::unique_ptr<std::shared_ptr<OpWait>> mine(static_cast<std::shared_ptr<OpWait>*>(cbdata));
    OpWait& w = **mine;
    std::lock_guard lock(w.mu);
    w.done = true;
    w.status = status;
    w.cv.notify_all();
  };
  pmix_status_t rc = start(answered, share.get());
  if (rc == PMIX_OPERATION_SUCCEEDED) return {};  // done at once: no callback comes
  if (rc != PMIX_SUCCESS) return Error{Errc::internal, "PMIx could not " + what + ": " + status_text(rc)};
  share.release();  // the callback owns it now
  std::unique_lock lock(wait->mu);
  if (!wait->cv.wait_for(lock, kLibraryTimeout, [&] { return wait->done; }))
    return Error{Errc::unavailable, "the PMIx server did not " + what + " within " +
                                        std::to_string(kLibraryTimeout.count()) + " s: it has stopped answering"};
  if (wait->status != PMIX_SUCCESS && wait->status != PMIX_OPERATION_SUCCEEDED)
    return Error{Errc::internal, "PMIx could not " + what + ": " + status_text(wait->status)};
  return {};
}

}  // namespace

struct PmixServer::Impl : std::enable_shared_from_this<PmixServer::Impl> {
  EventLoop& loop;
  mutable std::mutex mu;
  std::map<std::string, std::weak_ptr<PmixNamespace::State>> spaces;  // by namespace

  // Loop thread: set when the library stopped answering; every later step is told why.
  bool stopped = false;
  std::string stopped_why;

  explicit Impl(EventLoop& l) : loop(l) {}
  Error note_failure(Error e) {
    if (e.code == Errc::unavailable && !stopped) {
      stopped = true;
      stopped_why = e.message + "; PMIx steps on this node fail until corral-node restarts";
      spdlog::error("{}", stopped_why);
    }
    return e;
  }
  // Loop thread: the namespace is alive for as long as the caller runs.
  std::shared_ptr<PmixNamespace::State> find(const std::string& nspace) const {
    std::lock_guard lock(mu);
    auto it = spaces.find(nspace);
    return it == spaces.end() ? nullptr : it->second.lock();
  }
};

struct PmixNamespace::State : std::enable_shared_from_this<PmixNamespace::State> {
  std::weak_ptr<PmixServer::Impl> server;
  PmixLayout layout;
  PmiExchange* exchange = nullptr;
  PmiCallbacks callbacks;
  std::string key;
  std::set<uint32_t> local_ranks;
  std::map<uint32_t, std::vector<std::string>> registered;  // rank -> its task's variables
  std::set<uint32_t> connected, finalized;                  // ranks that called PMIx_Init, _Finalize
  struct Pending {
    pmix_modex_cbfunc_t cbfunc;
    void* cbdata;
  };
  std::map<uint64_t, Pending> pending;  // fences handed to the exchange, by number
  uint64_t next_fence = 0;
  std::size_t fences_completed = 0;

  void fence(std::string blob, pmix_modex_cbfunc_t cbfunc, void* cbdata);
  void fence_done(uint64_t id, Result<PmiKvs> all);
  void report_error(const std::string& message) {
    if (callbacks.on_error) callbacks.on_error(-1, message);
  }
};

namespace {

// The library permits one server per process and its callbacks carry no context of
// ours, so the live server's state is reachable from them through this one pointer (set
// by PmixServer::start, cleared by its destructor after the library stopped calling).
std::atomic<PmixServer::Impl*> live_server{nullptr};

// Library thread: the server lives at least until PMIx_server_finalize has returned.
std::shared_ptr<PmixServer::Impl> current_server() {
  auto* p = live_server.load();
  return p == nullptr ? nullptr : p->shared_from_this();
}

std::string nspace_of(const pmix_proc_t& p) { return std::string(p.nspace, strnlen(p.nspace, PMIX_MAX_NSLEN + 1)); }

// Library thread. Only whole-namespace fences (MPI_Init's and MPI_Finalize's) are
// carried: a fence over part of a step would need an exchange among that part alone.
pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t[], size_t, char* data,
                       size_t ndata, pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  auto server = current_server();
  if (!server || nprocs == 0) return PMIX_ERR_NOT_SUPPORTED;
  std::string nspace = nspace_of(procs[0]);
  for (size_t i = 0; i < nprocs; ++i)
    if (nspace_of(procs[i]) != nspace || procs[i].rank != PMIX_RANK_WILDCARD) return PMIX_ERR_NOT_SUPPORTED;
  std::string blob(data == nullptr ? "" : std::string(data, ndata));
  std::weak_ptr<PmixServer::Impl> weak = server;
  server->loop.post([weak, nspace, blob = std::move(blob), cbfunc, cbdata]() mutable {
    auto srv = weak.lock();
    auto ns = srv ? srv->find(nspace) : nullptr;
    if (!ns) return cbfunc(PMIX_ERR_NOT_FOUND, nullptr, 0, cbdata, nullptr, nullptr);
    ns->fence(std::move(blob), cbfunc, cbdata);
  });
  return PMIX_SUCCESS;
}

// Library thread: MPI_Abort. The step is ended by its launcher (the callback); the
// client is released at once and exits by itself.
pmix_status_t on_abort(const pmix_proc_t* proc, void*, int status, const char msg[], pmix_proc_t[], size_t,
                       pmix_op_cbfunc_t, void*) {
  auto server = current_server();
  if (!server || proc == nullptr) return PMIX_OPERATION_SUCCEEDED;
  PmiAbort abort{static_cast<int>(proc->rank), status, msg == nullptr ? "" : msg};
  std::weak_ptr<PmixServer::Impl> weak = server;
  server->loop.post([weak, nspace = nspace_of(*proc), abort] {
    auto srv = weak.lock();
    auto ns = srv ? srv->find(nspace) : nullptr;
    if (ns && ns->callbacks.on_abort) ns->callbacks.on_abort(abort);
  });
  return PMIX_OPERATION_SUCCEEDED;
}

// Library thread: a rank connected (PMIx_Init) or finalized. Posted before the library
// answers the client, so the loop learns of a finalize before it can see the task exit.
void note_client(const pmix_proc_t* proc, bool finalized) {
  auto server = current_server();
  if (!server || proc == nullptr) return;
  std::weak_ptr<PmixServer::Impl> weak = server;
  server->loop.post([weak, nspace = nspace_of(*proc), rank = proc->rank, finalized] {
    auto srv = weak.lock();
    auto ns = srv ? srv->find(nspace) : nullptr;
    if (ns) (finalized ? ns->finalized : ns->connected).insert(rank);
  });
}
pmix_status_t on_connected(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t, void*) {
  note_client(proc, false);
  return PMIX_OPERATION_SUCCEEDED;
}
pmix_status_t on_finalized(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t, void*) {
  note_client(proc, true);
  return PMIX_OPERATION_SUCCEEDED;
}

// Everything else (direct modex, publish, spawn, connect, tools) is not offered: a
// program asking gets PMIX_ERR_NOT_SUPPORTED from the library.
pmix_server_module_t server_module() {
  pmix_server_module_t m;
  std::memset(&m, 0, sizeof m);
  m.client_connected = on_connected;
  m.client_finalized = on_finalized;
  m.abort = on_abort;
  m.fence_nb = on_fence;
  return m;
}

// Comma-joined list of what `parts` holds, for the library's regex and peer lists.
template <typename T>
std::string join(const std::vector<T>& parts, const char* sep = ",") {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    if constexpr (std::is_same_v<T, std::string>)
      out += p;
    else
      out += std::to_string(p);
  }
  return out;
}

using LibraryString = std::unique_ptr<char, decltype(&std::free)>;

// The library's compact form of a node list or of the ranks per node: a "pmix:" string,
// or a compressed "blob:" whose length only the library knows, so it stays as it made it.
Result<LibraryString> regex(pmix_status_t (*fn)(const char*, char**), const std::string& input, const char* what) {
  char* out = nullptr;
  pmix_status_t rc = fn(input.c_str(), &out);
  LibraryString owned(out, &std::free);
  if (rc != PMIX_SUCCESS || out == nullptr)
    return Error{Errc::internal, std::string("PMIx could not encode the ") + what + ": " + status_text(rc)};
  return owned;
}

}  // namespace

Status check_pmix_layout(const PmixLayout& l) {
  if (l.nspace.empty() || l.nspace.size() > PMIX_MAX_NSLEN) return invalid("PMIx namespace '" + l.nspace + "' is empty or too long");
  for (char c : l.nspace)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return invalid("PMIx namespace '" + l.nspace + "' holds a character other than letters, digits, '.', '_', '-'");
  if (l.nodes.empty() || l.nodes.size() != l.ranks.size()) return invalid("PMIx layout: every node needs its ranks");
  std::size_t size = 0;
  for (const auto& r : l.ranks) size += r.size();
  std::vector<bool> seen(size, false);
  for (std::size_t i = 0; i < l.nodes.size(); ++i) {
    if (l.nodes[i].empty() || l.nodes[i].find(',') != std::string::npos)
      return invalid("PMIx layout: node name '" + l.nodes[i] + "' is empty or holds a comma");
    for (uint32_t r : l.ranks[i]) {
      if (r >= size || seen[r]) return invalid("PMIx layout: rank " + std::to_string(r) + " is out of range or twice");
      seen[r] = true;
    }
  }
  if (l.local.empty()) return invalid("PMIx layout: no node of the step is on this agent");
  for (std::size_t i : l.local)
    if (i >= l.nodes.size() || l.ranks[i].empty()) return invalid("PMIx layout: a local node has no ranks");
  return {};
}

Result<PmixLayout> pmix_block_layout(std::string nspace, const std::vector<std::string>& nodes,
                                     const std::vector<uint32_t>& tasks, const std::vector<std::string>& local_nodes,
                                     uid_t uid, gid_t gid) {
  if (nodes.size() != tasks.size())
    return invalid("the PMIx layout names " + std::to_string(nodes.size()) + " nodes but gives " +
                   std::to_string(tasks.size()) + " task counts");
  PmixLayout l;
  l.nspace = std::move(nspace);
  l.uid = uid;
  l.gid = gid;
  l.nodes = nodes;
  uint64_t rank = 0;
  for (uint32_t count : tasks) {
    if (rank + count > kMaxPmixRanks) return invalid("the PMIx layout has more than " + std::to_string(kMaxPmixRanks) + " ranks");
    auto& ranks = l.ranks.emplace_back();
    for (uint32_t i = 0; i < count; ++i) ranks.push_back(static_cast<uint32_t>(rank++));
  }
  for (const auto& name : local_nodes) {
    auto it = std::find(nodes.begin(), nodes.end(), name);
    if (it == nodes.end()) return invalid("node " + name + " is missing from the PMIx layout");
    l.local.push_back(static_cast<std::size_t>(it - nodes.begin()));
  }
  std::sort(l.local.begin(), l.local.end());
  l.local.erase(std::unique(l.local.begin(), l.local.end()), l.local.end());
  if (auto st = check_pmix_layout(l); !st) return st.error();
  return l;
}

std::string pmix_fence_key(const PmixLayout& layout) {
  return std::string(kFenceKeyPrefix) + (layout.local.empty() ? "" : layout.nodes[layout.local.front()]);
}

// ------------------------------------------------------------------ namespace state

void PmixNamespace::State::fence(std::string blob, pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  if (blob.size() > kMaxFenceBytesPerRank * local_ranks.size()) {
    report_error("the ranks on this node put " + std::to_string(blob.size()) + " bytes of PMIx data into one fence (at most " +
                 std::to_string(kMaxFenceBytesPerRank) + " per rank)");
    return cbfunc(PMIX_ERR_OUT_OF_RESOURCE, nullptr, 0, cbdata, nullptr, nullptr);
  }
  uint64_t id = next_fence++;
  pending[id] = {cbfunc, cbdata};
  std::weak_ptr<State> weak = shared_from_this();
  exchange->fence({{key, job::base64url_encode(blob)}}, [weak, id](Result<PmiKvs> all) {
    if (auto self = weak.lock()) self->fence_done(id, std::move(all));
  });
}

void PmixNamespace::State::fence_done(uint64_t id, Result<PmiKvs> all) {
  auto it = pending.find(id);
  if (it == pending.end()) return;
  Pending p = it->second;
  pending.erase(it);
  auto joined = std::make_unique<std::string>();
  if (all) {
    for (const auto& [k, v] : *all) {
      if (k.compare(0, kFenceKeyPrefix.size(), kFenceKeyPrefix) != 0) continue;
      auto bytes = job::base64url_decode(v);
      if (!bytes) {
        all = Error{Errc::invalid_argument, "the PMIx data of " + k.substr(kFenceKeyPrefix.size()) + " is not base64url"};
        break;
      }
      *joined += *bytes;
    }
  }
  if (!all) {
    report_error("PMIx fence: " + all.message());
    return p.cbfunc(PMIX_ERR_LOST_CONNECTION, nullptr, 0, p.cbdata, nullptr, nullptr);
  }
  ++fences_completed;
  // The library reads the data until it calls the release function, which frees it.
  std::string* data = joined.release();
  p.cbfunc(PMIX_SUCCESS, data->data(), data->size(), p.cbdata,
           [](void* d) { std::unique_ptr<std::string>(static_cast<std::string*>(d)).reset(); }, data);
}

// ------------------------------------------------------------------ server

namespace {

// The library writes the shared topology as `hwloc.sm` in its directory, readable by the
// agent's user only; tasks run as other users. The directory (the agent's own) becomes
// traversable but not listable, and that one file readable: it holds what /sys shows
// everyone.
void share_topology_file(const std::string& dir) {
  const std::string file = dir + "/hwloc.sm";
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) return;
  if (::chmod(file.c_str(), 0644) != 0 || ::chmod(dir.c_str(), 0711) != 0)
    spdlog::warn("cannot let tasks read the node's topology in {}: {}", file, std::strerror(errno));
}

}  // namespace

PmixServer::PmixServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<PmixServer>> PmixServer::start(EventLoop& loop, const std::string& tmpdir,
                                                      const std::string& hostname) {
  if (live_server.load() != nullptr) return Error{Errc::internal, "a PMIx server already runs in this process"};
  PmixInfoList info;
  info.add_string(PMIX_SERVER_TMPDIR, tmpdir);
  info.add_string(PMIX_SYSTEM_TMPDIR, tmpdir);
  if (!hostname.empty()) info.add_string(PMIX_HOSTNAME, hostname);
  info.add_bool(PMIX_SERVER_TOOL_SUPPORT, false);
  info.add_bool(PMIX_SERVER_SYSTEM_SUPPORT, false);
  // The node's hwloc topology, read once here and mapped by every client (the file made
  // readable below): without it each Open MPI rank reads /sys itself, which made a
  // 64-rank start-up 1.3 times mpirun's (bench/mpi).
  info.add_bool(PMIX_SERVER_SHARE_TOPOLOGY, true);
  static pmix_server_module_t module = server_module();  // the library keeps the pointer
  auto impl = std::make_shared<Impl>(loop);
  live_server.store(impl.get());
  pmix_status_t rc = PMIx_server_init(&module, info.data(), info.size());
  if (rc != PMIX_SUCCESS) {
    live_server.store(nullptr);
    return Error{Errc::unavailable, "the PMIx server did not start: " + status_text(rc)};
  }
  share_topology_file(tmpdir);
  return std::unique_ptr<PmixServer>(new PmixServer(std::move(impl)));
}

PmixServer::~PmixServer() {
  // Namespaces were destroyed first (they must not outlive the server). OpenPMIx 4.2
  // may never return from finalize once its thread has stopped (see
  // job::pmix_namespace_name): the agent is going away, so it waits a while and goes on.
  // The thread keeps the server's state alive for callbacks that may still come.
  auto finished = std::make_shared<std::promise<void>>();
  auto done = finished->get_future();
  std::thread([finished, impl = impl_] {
    PMIx_server_finalize();
    live_server.store(nullptr);
    finished->set_value();
  }).detach();
  if (done.wait_for(kLibraryTimeout) != std::future_status::ready) {
    spdlog::warn("the PMIx server did not stop within {} s; leaving it", kLibraryTimeout.count());
    live_server.store(nullptr);  // its callbacks, should any still come, find no loop to post to
  }
}

std::size_t PmixServer::namespaces() const {
  std::lock_guard lock(impl_->mu);
  std::size_t n = 0;
  for (const auto& [name, weak] : impl_->spaces) n += weak.expired() ? 0 : 1;
  return n;
}

namespace {

// What the library tells the step's clients about the job: sizes, where every rank
// runs (node and process maps), and this agent's ranks (local peers and leader).
Result<PmixInfoList> namespace_info(const PmixLayout& l) {
  std::size_t size = 0;
  for (const auto& r : l.ranks) size += r.size();
  std::vector<std::string> ppn;
  for (const auto& r : l.ranks) ppn.push_back(join(r));
  auto node_map = regex(PMIx_generate_regex, join(l.nodes), "node map");
  if (!node_map) return node_map.error();
  auto proc_map = regex(PMIx_generate_ppn, join(ppn, ";"), "process map");
  if (!proc_map) return proc_map.error();
  std::vector<uint32_t> local;
  for (std::size_t i : l.local) local.insert(local.end(), l.ranks[i].begin(), l.ranks[i].end());
  std::sort(local.begin(), local.end());

  PmixInfoList info;
  const auto n = static_cast<uint32_t>(size);
  info.add_string(PMIX_JOBID, l.nspace);
  info.add_uint32(PMIX_JOB_SIZE, n);
  info.add_uint32(PMIX_UNIV_SIZE, n);
  info.add_uint32(PMIX_MAX_PROCS, n);
  info.add_uint32(PMIX_JOB_NUM_APPS, 1);
  info.add_uint32(PMIX_APPNUM, 0);
  info.add_rank(PMIX_APPLDR, 0);
  info.add_uint32(PMIX_APP_SIZE, n);
  info.add_uint32(PMIX_NUM_NODES, static_cast<uint32_t>(l.nodes.size()));
  info.add_regex(PMIX_NODE_MAP, node_map->get());
  info.add_regex(PMIX_PROC_MAP, proc_map->get());
  info.add_uint32(PMIX_LOCAL_SIZE, static_cast<uint32_t>(local.size()));
  info.add_uint32(PMIX_NODE_SIZE, static_cast<uint32_t>(local.size()));
  info.add_string(PMIX_LOCAL_PEERS, join(local));
  info.add_rank(PMIX_LOCALLDR, local.front());
  info.add_uint32(PMIX_NODEID, static_cast<uint32_t>(l.local.front()));
  for (std::size_t node = 0; node < l.nodes.size(); ++node) {
    for (std::size_t i = 0; i < l.ranks[node].size(); ++i) {
      const uint32_t rank = l.ranks[node][i];
      PmixInfoList proc;
      proc.add_rank(PMIX_RANK, rank);
      proc.add_uint32(PMIX_APPNUM, 0);
      proc.add_rank(PMIX_APPLDR, 0);
      proc.add_rank(PMIX_GLOBAL_RANK, rank);
      proc.add_rank(PMIX_APP_RANK, rank);
      proc.add_uint16(PMIX_LOCAL_RANK, static_cast<uint16_t>(i));
      proc.add_uint16(PMIX_NODE_RANK, static_cast<uint16_t>(i));
      proc.add_uint32(PMIX_NODEID, static_cast<uint32_t>(node));
      proc.add_string(PMIX_HOSTNAME, l.nodes[node]);
      info.add_array(PMIX_PROC_DATA, std::move(proc));
    }
  }
  return info;
}

}  // namespace

Result<std::unique_ptr<PmixNamespace>> PmixServer::add(PmixLayout layout, PmiExchange& exchange,
                                                       PmiCallbacks callbacks) {
  if (auto st = check_pmix_layout(layout); !st) return st.error();
  if (impl_->find(layout.nspace)) return invalid("PMIx namespace " + layout.nspace + " is registered already");
  auto info = namespace_info(layout);
  if (!info) return info.error();
  auto state = std::make_shared<PmixNamespace::State>();
  for (std::size_t i : layout.local) state->local_ranks.insert(layout.ranks[i].begin(), layout.ranks[i].end());
  if (impl_->stopped) return Error{Errc::unavailable, impl_->stopped_why};
  auto registered = wait_for_library(
      [&](pmix_op_cbfunc_t cb, void* cbdata) {
        return PMIx_server_register_nspace(layout.nspace.c_str(), static_cast<int>(state->local_ranks.size()),
                                           info->data(), info->size(), cb, cbdata);
      },
      "register namespace " + layout.nspace);
  if (!registered) return impl_->note_failure(registered.error());
  state->server = impl_;
  state->key = pmix_fence_key(layout);
  state->layout = std::move(layout);
  state->exchange = &exchange;
  state->callbacks = std::move(callbacks);
  {
    std::lock_guard lock(impl_->mu);
    for (auto it = impl_->spaces.begin(); it != impl_->spaces.end();)  // forget the ended
      it = it->second.expired() ? impl_->spaces.erase(it) : std::next(it);
    impl_->spaces[state->layout.nspace] = state;
  }
  return std::unique_ptr<PmixNamespace>(new PmixNamespace(std::move(state)));
}

// ------------------------------------------------------------------ namespace

PmixNamespace::PmixNamespace(std::shared_ptr<State> state) : state_(std::move(state)) {}

PmixNamespace::~PmixNamespace() {
  // Fences still in the exchange fail now: the library waits for every one it handed over.
  auto pending = std::exchange(state_->pending, {});
  for (auto& [id, p] : pending) p.cbfunc(PMIX_ERR_LOST_CONNECTION, nullptr, 0, p.cbdata, nullptr, nullptr);
  if (auto server = state_->server.lock()) {
    std::lock_guard lock(server->mu);
    server->spaces.erase(state_->layout.nspace);
  }
  // Not waited for: the library finishes on its own thread (and waiting here has been
  // seen to deadlock OpenPMIx 4.2 after it refused a client).
  PMIx_server_deregister_nspace(state_->layout.nspace.c_str(), [](pmix_status_t, void*) {}, nullptr);
}

Result<std::vector<std::string>> PmixNamespace::task_env(uint32_t rank) {
  State& s = *state_;
  if (s.local_ranks.count(rank) == 0) return not_found("rank " + std::to_string(rank) + " is not on this node");
  if (auto it = s.registered.find(rank); it != s.registered.end()) return it->second;  // a start tried again
  pmix_proc_t proc;
  PMIX_PROC_LOAD(&proc, s.layout.nspace.c_str(), rank);
  auto server = s.server.lock();
  if (!server || server->stopped) return Error{Errc::unavailable, server ? server->stopped_why : "the PMIx server is gone"};
  auto registered = wait_for_library(
      [&](pmix_op_cbfunc_t cb, void* cbdata) {
        return PMIx_server_register_client(&proc, s.layout.uid, s.layout.gid, nullptr, cb, cbdata);
      },
      "register rank " + std::to_string(rank) + " of " + s.layout.nspace);
  if (!registered) return server->note_failure(registered.error());
  char** env = nullptr;
  pmix_status_t rc = PMIx_server_setup_fork(&proc, &env);
  std::vector<std::string> out;
  for (char** e = env; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  PMIX_ARGV_FREE(env);
  if (rc != PMIX_SUCCESS) return Error{Errc::internal, "PMIx could not set up rank " + std::to_string(rank) + ": " + status_text(rc)};
  // Open MPI 4 starts as a singleton unless it recognises the launcher (Slurm, Flux, LSF)
  // or is told not to decide by it: with PMIx here, its PMIx client is what it should use.
  out.emplace_back("OMPI_MCA_schizo=^orte");
  if (s.layout.virtual_nodes && s.layout.nodes.size() > 1) out.emplace_back("OMPI_MCA_btl=^vader");
  s.registered.emplace(rank, out);
  return out;
}

const std::string& PmixNamespace::name() const { return state_->layout.nspace; }
bool PmixNamespace::left_unfinalized(uint32_t rank) const {
  return state_->connected.count(rank) != 0 && state_->finalized.count(rank) == 0;
}
std::size_t PmixNamespace::fences_completed() const { return state_->fences_completed; }

// ------------------------------------------------------------------ host

PmixHost::PmixHost(EventLoop& loop, std::string tmpdir, std::string hostname)
    : loop_(loop), tmpdir_(std::move(tmpdir)), hostname_(std::move(hostname)) {}

PmixHost::~PmixHost() {
  server_.reset();
  std::error_code ec;
  if (made_tmpdir_) std::filesystem::remove_all(tmpdir_, ec);
}

// The rendezvous directory: the agent's own (private, it holds only what the library
// writes), made here when the agent has no state directory.
Status PmixHost::make_tmpdir() {
  if (tmpdir_.empty()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "corral-pmix.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) return io_error("cannot make a directory for PMIx: " + std::string(std::strerror(errno)));
    tmpdir_ = pattern;
    made_tmpdir_ = true;
    return {};
  }
  if (::mkdir(tmpdir_.c_str(), 0700) != 0 && errno != EEXIST)
    return io_error("cannot make " + tmpdir_ + " for PMIx: " + std::strerror(errno));
  struct stat st {};
  if (::lstat(tmpdir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
    return io_error(tmpdir_ + " is not a directory of the agent's own: PMIx keeps its rendezvous there");
  return {};
}

Result<PmixServer*> PmixHost::server() {
  if (server_) return server_.get();
  if (!failed_.empty()) return Error{Errc::unavailable, failed_};
  if (auto st = make_tmpdir(); !st) {
    failed_ = st.message();
    return st.error();
  }
  auto started = PmixServer::start(loop_, tmpdir_, hostname_);
  if (!started) {
    failed_ = started.message();
    spdlog::error("{}", failed_);
    return started.error();
  }
  server_ = std::move(*started);
  spdlog::info("PMIx server started (OpenPMIx {}), rendezvous in {}", PMIx_Get_version(), tmpdir_);
  return server_.get();
}

}  // namespace corral::node
