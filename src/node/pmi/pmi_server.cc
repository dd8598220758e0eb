#include "node/pmi/pmi_server.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>

namespace corral::node {

namespace {

// A task gets this much key+value storage; MPICH 4.0 puts a few KiB per rank.
constexpr std::size_t kMaxPutBytesPerRank = 4u << 20;
// Replies queued for a task that does not read them before it is cut off.
constexpr std::size_t kMaxPendingOutput = 1u << 20;
// Reads per readiness event, so one chatty task cannot starve the loop.
constexpr int kReadsPerEvent = 16;

using Args = std::vector<std::pair<std::string, std::string>>;

std::string error_reply(std::string_view name, const std::string& message) {
  return pmi::format_reply(name, {{"rc", "-1"}, {"msg", message}});
}

// The reply name MPICH's client waits for after commands corral does not implement.
const char* unsupported_reply_name(const std::string& cmd) {
  if (cmd == "publish_name") return "publish_result";
  if (cmd == "unpublish_name") return "unpublish_result";
  if (cmd == "lookup_name") return "lookup_result";
  if (cmd == "create_kvs") return "newkvs";
  if (cmd == "destroy_kvs") return "kvs_destroyed";
  if (cmd == "getbyidx") return "getbyidx_results";
  if (cmd == "spawn") return "spawn_result";
  return nullptr;
}

int parse_int(const std::string* text, int fallback) {
  if (!text) return fallback;
  int v = fallback;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  return ec == std::errc() && end == text->data() + text->size() ? v : fallback;
}

struct Block {
  int start;  // first node
  int count;  // consecutive nodes
  int size;   // ranks on each
};

std::vector<Block> blocks_of(const std::vector<int>& node_of_rank) {
  std::vector<Block> blocks;
  std::size_t i = 0;
  while (i < node_of_rank.size()) {
    std::size_t j = i;
    while (j < node_of_rank.size() && node_of_rank[j] == node_of_rank[i]) ++j;
    int node = node_of_rank[i], run = static_cast<int>(j - i);
    if (!blocks.empty() && blocks.back().size == run && blocks.back().start + blocks.back().count == node)
      ++blocks.back().count;
    else
      blocks.push_back({node, 1, run});
    i = j;
  }
  return blocks;
}

// What MPICH makes of the first `nblocks` blocks for `n` ranks: the list is repeated
// until every rank has a node, later passes starting at the first block on node 0.
std::vector<int> expand_like_mpich(const std::vector<Block>& blocks, std::size_t nblocks, std::size_t n) {
  std::vector<int> out;
  out.reserve(n);
  bool wrapped = false;
  while (out.size() < n) {
    std::size_t b = 0;
    while (wrapped && b < nblocks && blocks[b].start != 0) ++b;
    for (; b < nblocks && out.size() < n; ++b) {
      if (blocks[b].start == 0) wrapped = true;
      for (int node = 0; node < blocks[b].count && out.size() < n; ++node)
        for (int r = 0; r < blocks[b].size && out.size() < n; ++r) out.push_back(blocks[b].start + node);
    }
  }
  return out;
}

std::string format_mapping(const std::vector<Block>& blocks, std::size_t nblocks) {
  std::string s = "(vector";
  for (std::size_t b = 0; b < nblocks; ++b)
    s += ",(" + std::to_string(blocks[b].start) + "," + std::to_string(blocks[b].count) + "," +
         std::to_string(blocks[b].size) + ")";
  return s + ")";
}

}  // namespace

std::vector<std::string> pmi_task_env(int rank, int size, int fd_in_task) {
  return {"PMI_FD=" + std::to_string(fd_in_task), "PMI_RANK=" + std::to_string(rank),
          "PMI_SIZE=" + std::to_string(size)};
}

std::string pmi_process_mapping(const std::vector<int>& node_of_rank) {
  if (node_of_rank.empty() || std::any_of(node_of_rank.begin(), node_of_rank.end(), [](int n) { return n < 0; }))
    return "";
  auto blocks = blocks_of(node_of_rank);
  // The shortest prefix MPICH expands back into the layout: one block for even block
  // layouts, one period for cyclic ones.
  for (std::size_t p = 1; p <= blocks.size(); ++p) {
    std::string text = format_mapping(blocks, p);
    if (text.size() > pmi::kValueMax) return "";
    if (expand_like_mpich(blocks, p, node_of_rank.size()) == node_of_rank) return text;
  }
  return "";
}

std::string pmi_block_process_mapping(const std::vector<int>& tasks_per_node) {
  std::vector<int> node_of_rank;
  for (std::size_t node = 0; node < tasks_per_node.size(); ++node)
    node_of_rank.insert(node_of_rank.end(), std::max(tasks_per_node[node], 0), static_cast<int>(node));
  return pmi_process_mapping(node_of_rank);
}

struct PmiServer::Conn {
  int rank = -1;
  UniqueFd fd;        // the server's end, non-blocking
  UniqueFd task_end;  // until the launcher takes it
  std::string in, out;
  bool open = true;
  bool watching_write = false;
  bool started = false;  // sent at least one line
  bool finalized = false;
  bool aborted = false;
  bool in_barrier = false;
  std::string skipping_mcmd;  // name of the multi-line command being skipped
  std::size_t put_bytes = 0;
  bool v2 = false;          // init asked for PMI-2: what follows is in its wire protocol
  std::string fence_thrid;  // PMI-2: the thrid of the kvs-fence being waited in
};

Result<std::unique_ptr<PmiServer>> PmiServer::create(EventLoop& loop, PmiExchange& exchange, PmiStep step,
                                                     const std::vector<int>& local_ranks, PmiCallbacks callbacks) {
  if (step.size <= 0) return invalid("PMI step size must be positive, got " + std::to_string(step.size));
  if (step.kvsname.empty() || step.kvsname.size() > pmi::kKvsNameMax ||
      step.kvsname.find_first_of(" \n=") != std::string::npos)
    return invalid("PMI kvsname '" + step.kvsname + "' must be 1-" + std::to_string(pmi::kKvsNameMax) +
                   " characters without spaces or '='");
  if (step.process_mapping.size() > pmi::kValueMax)
    return invalid("PMI_process_mapping is longer than " + std::to_string(pmi::kValueMax) + " characters");
  if (local_ranks.empty()) return invalid("a PMI server needs at least one local rank");
  std::set<int> seen;
  for (int r : local_ranks) {
    if (r < 0 || r >= step.size || !seen.insert(r).second)
      return invalid("local rank " + std::to_string(r) + " is duplicated or outside 0.." +
                     std::to_string(step.size - 1));
  }
  std::unique_ptr<PmiServer> server(new PmiServer(loop, exchange, std::move(step), std::move(callbacks)));
  for (int r : local_ranks) {
    if (auto st = server->add_rank(r); !st) return st.error();
  }
  return server;
}

PmiServer::PmiServer(EventLoop& loop, PmiExchange& exchange, PmiStep step, PmiCallbacks callbacks)
    : loop_(loop), exchange_(exchange), step_(std::move(step)), callbacks_(std::move(callbacks)) {
  if (step_.universe_size <= 0) step_.universe_size = step_.size;
  if (!step_.process_mapping.empty()) kvs_["PMI_process_mapping"] = step_.process_mapping;
}

PmiServer::~PmiServer() {
  for (auto& c : conns_)
    if (c->open) loop_.remove_fd(c->fd.get());
}

Status PmiServer::add_rank(int rank) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    const int err = errno;
    std::string msg = "cannot create the PMI socketpair for rank " + std::to_string(rank) + ": " + std::strerror(err);
    // Out of descriptors is the node's state, not the step's: the caller may try again.
    if (err == EMFILE || err == ENFILE || err == ENOMEM) return Error{Errc::unavailable, std::move(msg)};
    return io_error(std::move(msg));
  }
  auto c = std::make_unique<Conn>();
  c->rank = rank;
  c->fd.reset(sv[0]);
  c->task_end.reset(sv[1]);
  if (::fcntl(sv[0], F_SETFL, O_NONBLOCK) != 0)  // a new socket has no other status flag
    return io_error(std::string("cannot make the PMI socket non-blocking: ") + std::strerror(errno));
  Conn* raw = c.get();
  if (auto st = loop_.add_fd(raw->fd.get(), EPOLLIN, [this, raw](uint32_t ev) { on_events(*raw, ev); }); !st) return st;
  conns_.push_back(std::move(c));
  return {};
}

Result<PmiTaskEnd> PmiServer::take_task_end(int rank) {
  for (auto& c : conns_) {
    if (c->rank != rank) continue;
    if (!c->task_end.valid())
      return not_found("the PMI connection of rank " + std::to_string(rank) + " was already taken");
    PmiTaskEnd end;
    end.env = pmi_task_env(rank, step_.size, c->task_end.get());
    end.fd = std::move(c->task_end);
    return end;
  }
  return not_found("rank " + std::to_string(rank) + " is not served by this PMI server");
}

bool PmiServer::all_done() const {
  return std::all_of(conns_.begin(), conns_.end(),
                     [](const auto& c) { return c->finalized || c->aborted || !c->open; });
}

void PmiServer::on_events(Conn& c, uint32_t events) {
  if (events & EPOLLOUT) flush(c);
  if (c.open && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) read_input(c);
}

void PmiServer::read_input(Conn& c) {
  char buf[4096];
  for (int i = 0; i < kReadsPerEvent && c.open; ++i) {
    ssize_t n = ::read(c.fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      if (c.started && !c.finalized)
        report_error(c.rank, "rank " + std::to_string(c.rank) +
                                 " closed its PMI connection without PMI_Finalize (the task exited or crashed)");
      close_conn(c);
      return;
    }
    c.in.append(buf, static_cast<std::size_t>(n));
    consume(c);
    if (!c.open) return;
    if (c.in.size() > pmi::kLineMax)
      return fail(c, "sent a PMI message longer than " + std::to_string(pmi::kLineMax) + " bytes");
  }
}

void PmiServer::consume(Conn& c) {
  std::size_t start = 0;
  while (c.open) {
    std::string_view rest = std::string_view(c.in).substr(start);
    if (!c.v2) {
      auto nl = rest.find('\n');
      if (nl == std::string_view::npos || nl > pmi::kLineMax) break;
      handle_line(c, rest.substr(0, nl));
      start += nl + 1;
      continue;
    }
    if (rest.size() < pmi::kV2LengthChars) break;
    auto len = pmi::parse_v2_length(rest.substr(0, pmi::kV2LengthChars));
    if (!len) return fail(c, "sent a PMI-2 message without its length");
    if (*len > pmi::kLineMax)
      return fail(c, "sent a PMI-2 message longer than " + std::to_string(pmi::kLineMax) + " bytes");
    if (rest.size() < pmi::kV2LengthChars + *len) break;
    handle_v2(c, rest.substr(pmi::kV2LengthChars, *len));
    start += pmi::kV2LengthChars + *len;
  }
  if (c.open) c.in.erase(0, start);
}

void PmiServer::handle_line(Conn& c, std::string_view line) {
  c.started = true;
  if (!c.skipping_mcmd.empty()) {
    if (line != "endcmd") return;
    reply(c, error_reply(c.skipping_mcmd + "_result", "corral does not support PMI " + c.skipping_mcmd));
    c.skipping_mcmd.clear();
    return;
  }
  auto parsed = pmi::parse_line(line);
  if (!parsed) {
    spdlog::warn("PMI rank {}: {}", c.rank, parsed.message());
    return reply(c, error_reply("error", parsed.message()));
  }
  const pmi::Command& cmd = *parsed;
  const std::string& name = cmd.name;
  if (cmd.multi_line) {
    c.skipping_mcmd = name;  // the answer follows its "endcmd"
  } else if (name == "init") {
    const int version = parse_int(cmd.arg("pmi_version"), 0), sub = parse_int(cmd.arg("pmi_subversion"), 99);
    if (version == 2 && sub == 0) {
      reply(c, pmi::format_reply("response_to_init", {{"pmi_version", "2"}, {"pmi_subversion", "0"}, {"rc", "0"}}));
      c.v2 = true;  // the rest of c.in is PMI-2's
      return;
    }
    bool v1 = version == 1 && sub <= 1;
    Args args = {{"pmi_version", "1"}, {"pmi_subversion", "1"}, {"rc", v1 ? "0" : "-1"}};
    if (!v1) args.push_back({"msg", "corral serves PMI versions 1.1 and 2.0"});
    reply(c, pmi::format_reply("response_to_init", args));
  } else if (name == "get_maxes") {
    reply(c, pmi::format_reply("maxes", {{"rc", "0"},
                                         {"kvsname_max", std::to_string(pmi::kKvsNameMax)},
                                         {"keylen_max", std::to_string(pmi::kKeyMax)},
                                         {"vallen_max", std::to_string(pmi::kValueMax)}}));
  } else if (name == "get_appnum") {
    reply(c, pmi::format_reply("appnum", {{"rc", "0"}, {"appnum", std::to_string(step_.appnum)}}));
  } else if (name == "get_my_kvsname") {
    reply(c, pmi::format_reply("my_kvsname", {{"rc", "0"}, {"kvsname", step_.kvsname}}));
  } else if (name == "get_universe_size") {
    reply(c, pmi::format_reply("universe_size", {{"rc", "0"}, {"size", std::to_string(step_.universe_size)}}));
  } else if (name == "put") {
    handle_put(c, cmd);
  } else if (name == "get") {
    handle_get(c, cmd);
  } else if (name == "barrier_in") {
    handle_barrier_in(c);
  } else if (name == "finalize") {
    c.finalized = true;
    reply(c, pmi::format_reply("finalize_ack", {{"rc", "0"}}));
  } else if (name == "abort") {
    handle_abort(c, cmd);
  } else if (const char* reply_name = unsupported_reply_name(name)) {
    reply(c, error_reply(reply_name, "corral does not support PMI " + name));
  } else {
    spdlog::warn("PMI rank {}: unknown command '{}'", c.rank, name);
    reply(c, error_reply("error", "unknown PMI command '" + name + "'"));
  }
}

std::string PmiServer::charge_put(Conn& c, const std::string* key, const std::string* value) {
  if (!key || key->empty() || !value) return "a put needs key= and value=";
  if (key->size() > pmi::kKeyMax) return "key is longer than keylen_max=" + std::to_string(pmi::kKeyMax);
  if (c.v2 && value->size() > pmi::kV2ValueMax)
    return "value is longer than " + std::to_string(pmi::kV2ValueMax) + " characters";
  if (!c.v2 && value->size() > pmi::kValueMax)
    return "value is longer than vallen_max=" + std::to_string(pmi::kValueMax);
  if (c.put_bytes + key->size() + value->size() > kMaxPutBytesPerRank)
    return "rank put more than " + std::to_string(kMaxPutBytesPerRank) + " bytes";
  c.put_bytes += key->size() + value->size();
  return "";
}

void PmiServer::store_put(const std::string& key, const std::string& value) {
  kvs_.insert_or_assign(key, value);  // visible to this node's ranks at once
  pending_puts_.insert_or_assign(key, value);
}

void PmiServer::handle_put(Conn& c, const pmi::Command& cmd) {
  const std::string* kvsname = cmd.arg("kvsname");
  const std::string* key = cmd.arg("key");
  const std::string* value = cmd.arg("value");
  std::string problem = kvsname && *kvsname != step_.kvsname
                            ? "unknown kvsname '" + *kvsname + "' (this step's is '" + step_.kvsname + "')"
                            : charge_put(c, key, value);
  if (!problem.empty()) return reply(c, error_reply("put_result", problem));
  store_put(*key, *value);
  reply(c, pmi::format_reply("put_result", {{"rc", "0"}}));
}

void PmiServer::handle_get(Conn& c, const pmi::Command& cmd) {
  const std::string* kvsname = cmd.arg("kvsname");
  const std::string* key = cmd.arg("key");
  if (kvsname && *kvsname != step_.kvsname)
    return reply(c, error_reply("get_result", "unknown kvsname '" + *kvsname + "'"));
  if (!key || key->empty()) return reply(c, error_reply("get_result", "get needs key="));
  auto it = kvs_.find(*key);
  if (it == kvs_.end()) return reply(c, error_reply("get_result", "key '" + *key + "' not found"));
  reply(c, pmi::format_reply("get_result", {{"rc", "0"}, {"value", it->second}}));
}

void PmiServer::handle_abort(Conn& c, const pmi::Command& cmd) {
  PmiAbort info;
  info.rank = c.rank;
  info.exit_code = parse_int(cmd.arg("exitcode"), 1);
  const std::string* message = cmd.arg("message");
  if (!message) message = cmd.arg("msg");
  if (message) info.message = *message;
  spdlog::info("PMI rank {} aborted the step with exit code {}{}{}", info.rank, info.exit_code,
               info.message.empty() ? "" : ": ", info.message);
  c.aborted = true;
  close_conn(c);  // MPICH waits for an answer; EOF makes it exit
  if (callbacks_.on_abort)
    loop_.post([alive = std::weak_ptr<int>(alive_), cb = callbacks_.on_abort, info] {
      if (!alive.expired()) cb(info);
    });
}

void PmiServer::handle_barrier_in(Conn& c) {
  if (c.in_barrier) return fail(c, "entered a PMI barrier it was already waiting in");
  c.in_barrier = true;
  ++in_barrier_;
  if (in_barrier_ == conns_.size() && !fence_running_) start_fence();
}

void PmiServer::start_fence() {
  fence_running_ = true;
  PmiKvs puts;
  puts.swap(pending_puts_);
  auto called = std::make_shared<bool>(false);
  exchange_.fence(std::move(puts), [this, alive = std::weak_ptr<int>(alive_), called](Result<PmiKvs> all) {
    if (alive.expired() || *called) return;
    *called = true;
    finish_fence(std::move(all));
  });
}

void PmiServer::finish_fence(Result<PmiKvs> all_puts) {
  fence_running_ = false;
  in_barrier_ = 0;
  if (!all_puts) {
    report_error(-1, "the PMI key exchange between the step's nodes failed: " + all_puts.message());
    for (auto& c : conns_) close_conn(*c);
    return;
  }
  for (auto& [key, value] : *all_puts) kvs_.insert_or_assign(key, value);
  ++barriers_completed_;
  for (auto& c : conns_) {
    if (!c->in_barrier) continue;
    c->in_barrier = false;
    if (!c->open) continue;
    if (!c->v2) {
      reply(*c, pmi::format_reply("barrier_out", {{"rc", "0"}}));
      continue;
    }
    Args args{{"rc", "0"}};
    if (!c->fence_thrid.empty()) args.push_back({"thrid", c->fence_thrid});
    reply(*c, pmi::format_v2("kvs-fence-response", args));
  }
}

// ------------------------------------------------------------------ PMI-2

void PmiServer::handle_v2(Conn& c, std::string_view message) {
  c.started = true;
  auto parsed = pmi::parse_v2(message);
  if (!parsed) {
    spdlog::warn("PMI rank {}: {}", c.rank, parsed.message());
    return reply(c, pmi::format_v2("error-response", {{"rc", "-1"}, {"errmsg", parsed.message()}}));
  }
  const pmi::Command& cmd = *parsed;
  const std::string thrid = cmd.arg("thrid") ? *cmd.arg("thrid") : "";
  auto answer = [&](std::string_view name, Args args) { reply_v2(c, name, std::move(args), thrid); };
  auto refuse = [&](std::string_view name, const std::string& why) { answer(name, {{"rc", "-1"}, {"errmsg", why}}); };
  const std::string& name = cmd.name;
  if (name == "fullinit") {
    // A rank is its connection's: a task cannot speak for another.
    if (parse_int(cmd.arg("pmirank"), -1) != c.rank)
      return refuse("fullinit-response", "pmirank is not this task's rank " + std::to_string(c.rank));
    answer("fullinit-response", {{"rc", "0"},
                                 {"pmi-version", "2"},
                                 {"pmi-subversion", "0"},
                                 {"rank", std::to_string(c.rank)},
                                 {"size", std::to_string(step_.size)},
                                 {"appnum", std::to_string(step_.appnum)},
                                 {"debugged", "FALSE"},
                                 {"pmiverbose", "FALSE"}});
  } else if (name == "job-getid") {
    answer("job-getid-response", {{"rc", "0"}, {"jobid", step_.kvsname}});
  } else if (name == "info-getjobattr") {
    const std::string* key = cmd.arg("key");
    std::string value;
    if (key && *key == "PMI_process_mapping") value = step_.process_mapping;
    if (key && *key == "universeSize") value = std::to_string(step_.universe_size);
    answer("info-getjobattr-response", {{"rc", "0"}, {"found", value.empty() ? "FALSE" : "TRUE"}, {"value", value}});
  } else if (name == "info-putnodeattr" || name == "info-getnodeattr") {
    handle_v2_nodeattr(c, cmd, thrid);
  } else if (name == "kvs-put") {
    if (auto problem = charge_put(c, cmd.arg("key"), cmd.arg("value")); !problem.empty())
      return refuse("kvs-put-response", problem);
    store_put(*cmd.arg("key"), *cmd.arg("value"));
    answer("kvs-put-response", {{"rc", "0"}});
  } else if (name == "kvs-get") {
    const std::string* key = cmd.arg("key");
    if (!key || key->empty()) return refuse("kvs-get-response", "kvs-get needs key=");
    auto it = kvs_.find(*key);
    answer(
        "kvs-get-response",
        {{"rc", "0"}, {"found", it == kvs_.end() ? "FALSE" : "TRUE"}, {"value", it == kvs_.end() ? "" : it->second}});
  } else if (name == "kvs-fence") {
    c.fence_thrid = thrid;
    handle_barrier_in(c);
  } else if (name == "finalize") {
    c.finalized = true;
    answer("finalize-response", {{"rc", "0"}});
  } else if (name == "abort") {
    handle_abort(c, cmd);
  } else {
    spdlog::warn("PMI rank {}: PMI-2 command '{}' is not served", c.rank, name);
    refuse(name + "-response", "corral does not support PMI-2 " + name);
  }
}

void PmiServer::reply_v2(Conn& c, std::string_view name, Args args, const std::string& thrid) {
  if (!thrid.empty()) args.push_back({"thrid", thrid});
  reply(c, pmi::format_v2(name, args));
}

void PmiServer::handle_v2_nodeattr(Conn& c, const pmi::Command& cmd, const std::string& thrid) {
  const std::string* key = cmd.arg("key");
  if (cmd.name == "info-putnodeattr") {
    const std::string* value = cmd.arg("value");
    if (auto problem = charge_put(c, key, value); !problem.empty())
      return reply_v2(c, "info-putnodeattr-response", {{"rc", "-1"}, {"errmsg", problem}}, thrid);
    node_attrs_.insert_or_assign(*key, *value);
    reply_v2(c, "info-putnodeattr-response", {{"rc", "0"}}, thrid);
    // Who waited for it gets it now.
    auto waited =
        std::stable_partition(parked_.begin(), parked_.end(), [&](const ParkedGet& p) { return p.key != *key; });
    for (auto it = waited; it != parked_.end(); ++it)
      if (it->conn->open)
        reply_v2(*it->conn, "info-getnodeattr-response", {{"rc", "0"}, {"found", "TRUE"}, {"value", *value}},
                 it->thrid);
    parked_.erase(waited, parked_.end());
    return;
  }
  if (!key || key->empty())
    return reply_v2(c, "info-getnodeattr-response", {{"rc", "-1"}, {"errmsg", "needs key="}}, thrid);
  if (auto it = node_attrs_.find(*key); it != node_attrs_.end())
    return reply_v2(c, "info-getnodeattr-response", {{"rc", "0"}, {"found", "TRUE"}, {"value", it->second}}, thrid);
  const std::string* wait = cmd.arg("wait");
  if (wait && *wait == "TRUE") {
    // A client waits for its answer, so a rank has one parked get at most.
    for (const auto& p : parked_)
      if (p.conn == &c) return fail(c, "asked for a second node attribute while waiting for one");
    parked_.push_back({&c, *key, thrid});
    return;
  }
  reply_v2(c, "info-getnodeattr-response", {{"rc", "0"}, {"found", "FALSE"}}, thrid);
}

void PmiServer::reply(Conn& c, std::string line) {
  if (!c.open) return;
  c.out += line;
  if (c.out.size() > kMaxPendingOutput) return fail(c, "does not read its PMI replies");
  flush(c);
}

void PmiServer::flush(Conn& c) {
  while (c.open && !c.out.empty()) {
    ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out.erase(0, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return watch(c, true);
    } else {
      if (c.started && !c.finalized)
        report_error(c.rank, "rank " + std::to_string(c.rank) + " went away before reading its PMI reply");
      return close_conn(c);
    }
  }
  if (c.open) watch(c, false);
}

void PmiServer::watch(Conn& c, bool want_write) {
  if (c.watching_write == want_write) return;
  c.watching_write = want_write;
  loop_.remove_fd(c.fd.get());
  Conn* raw = &c;
  uint32_t events = EPOLLIN | (want_write ? EPOLLOUT : 0u);
  if (auto st = loop_.add_fd(c.fd.get(), events, [this, raw](uint32_t ev) { on_events(*raw, ev); }); !st) {
    report_error(c.rank, "cannot watch the PMI connection of rank " + std::to_string(c.rank) + ": " + st.message());
    c.fd.reset();
    c.open = false;
  }
}

void PmiServer::close_conn(Conn& c) {
  if (!c.open) return;
  loop_.close_fd(c.fd);
  c.open = false;
  c.in.clear();
  c.out.clear();
}

void PmiServer::fail(Conn& c, const std::string& message) {
  report_error(c.rank, "rank " + std::to_string(c.rank) + " " + message + "; its PMI connection was closed");
  close_conn(c);
}

void PmiServer::report_error(int rank, std::string message) {
  spdlog::warn("PMI step {}: {}", step_.kvsname, message);
  if (!callbacks_.on_error) return;
  loop_.post([alive = std::weak_ptr<int>(alive_), cb = callbacks_.on_error, rank, message = std::move(message)] {
    if (!alive.expired()) cb(rank, message);
  });
}

}  // namespace corral::node
