// corral-placement-bench: how long one placement decision takes on a large topology.
//
// Builds a topology in-process (a three-level fat tree, a dragonfly, a block system, or a
// topology file), a sched::Scheduler with that topology's placer and nodes of --cores cores,
// then fills the machine to --busy (by cores) through Scheduler::schedule with a mix of jobs
// (1 core, a few cores, one node, 2-16 nodes, 64-1024 nodes; some exclusive), releasing
// and refilling a few times so the free space is fragmented as on a live system.
//
// Decision timing: the placer is called directly (Placer::place_indexed on a snapshot of the
// pool's node states, with a FreeCoreIndex of the snapshot, exactly what a scheduling pass
// hands it) for --decisions requests drawn from the same mix. Placements are not committed,
// so every decision sees the same busy machine; the time is the placer call alone.
//
// --backfill-pass: after the fill, enqueues --pending jobs with time limits and times one
// Scheduler::schedule() (priority order, EASY backfill, reservations, placements and their
// allocation), reporting milliseconds and how many jobs started.
//
// Also places a range of job sizes on an empty machine and counts the placements that did
// not get Placer::fewest_leaves leaf switches / blocks (dragonfly: only jobs fitting one leaf
// are held to that; larger ones are spread on purpose). Prints one JSON document.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placers/free_core_index.h"
#include "placers/placers.h"
#include "sched/node_properties.h"
#include "sched/scheduler.h"
#include "topology/topology.h"
#include "topology/topology_generate.h"

namespace {

using corral::sched::NodeConfig;
using corral::sched::PendingJob;
using corral::sched::Scheduler;
using corral::topology::Allocation;
using corral::topology::NodeState;
using corral::topology::Placer;
using corral::topology::Request;
using corral::topology::Topology;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

struct Options {
  std::string topology = "fattree";  // fattree | dragonfly | block | file
  std::string file;
  unsigned nodes = 0;  // 0: the topology's default
  unsigned cores = 64;
  unsigned leaf_nodes = 32, radix = 64;                           // fat tree
  unsigned groups = 87, switches_per_group = 32, per_switch = 4;  // dragonfly: 11,136 nodes
  unsigned base_block = 16;                                       // block
  double busy = 0.5;
  unsigned decisions = 5000;
  bool backfill = false;
  unsigned pending = 10000;
  uint64_t seed = 1;
  // With --properties F: every node offers four Infiniband-style properties, and a
  // fraction F of them also the one each decision requires (the rest have that port
  // down); each decision first narrows the allowed nodes as the controller does.
  double properties = 0;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "corral-placement-bench: " << why << "\n"
            << "usage: corral-placement-bench [--topology fattree|dragonfly|block] [--file F]\n"
               "  [--nodes N] [--cores C] [--leaf-nodes N] [--radix R] [--groups G]\n"
               "  [--switches-per-group S] [--nodes-per-switch N] [--base-block N]\n"
               "  [--busy F] [--decisions N] [--backfill-pass] [--pending N] [--seed S]\n"
               "  [--properties F]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    auto number = [&]() -> unsigned { return static_cast<unsigned>(std::stoul(value())); };
    if (a == "--topology")
      o.topology = value();
    else if (a == "--file") {
      o.file = value();
      o.topology = "file";
    } else if (a == "--nodes")
      o.nodes = number();
    else if (a == "--cores")
      o.cores = number();
    else if (a == "--leaf-nodes")
      o.leaf_nodes = number();
    else if (a == "--radix")
      o.radix = number();
    else if (a == "--groups")
      o.groups = number();
    else if (a == "--switches-per-group")
      o.switches_per_group = number();
    else if (a == "--nodes-per-switch")
      o.per_switch = number();
    else if (a == "--base-block")
      o.base_block = number();
    else if (a == "--busy")
      o.busy = std::stod(value());
    else if (a == "--properties")
      o.properties = std::stod(value());
    else if (a == "--decisions")
      o.decisions = number();
    else if (a == "--backfill-pass")
      o.backfill = true;
    else if (a == "--pending")
      o.pending = number();
    else if (a == "--seed")
      o.seed = std::stoull(value());
    else
      usage("unknown option " + a);
  }
  return o;
}

Topology make_topology(const Options& o) {
  namespace t = corral::topology;
  corral::Result<Topology> r = corral::invalid("no topology");
  if (o.topology == "fattree") {
    r = t::generate_fat_tree({o.nodes ? o.nodes : 100000, o.leaf_nodes, o.radix, 3, "node"});
  } else if (o.topology == "dragonfly") {
    r = t::generate_dragonfly({o.groups, o.switches_per_group, o.per_switch, "node"});
  } else if (o.topology == "block") {
    r = t::generate_blocks({o.nodes ? o.nodes : 65536, o.base_block, {}, "node"});
  } else if (o.topology == "file") {
    auto set = t::load_topology(o.file);
    if (!set) usage(set.error().message);
    const Topology* d = set->default_topology();
    if (!d) usage(o.file + " defines no topology");
    return *d;
  } else {
    usage("unknown topology " + o.topology);
  }
  if (!r) usage(r.error().message);
  return std::move(*r);
}

unsigned leaf_count(const Topology& topo) {
  if (topo.kind == corral::topology::Kind::block) return static_cast<unsigned>(topo.blocks.size());
  unsigned n = 0;
  for (const auto& s : topo.switches) n += s.nodes.empty() ? 0 : 1;
  return n;
}

// The job mix: (class, request). Sizes above a quarter of the machine are capped.
std::pair<std::string, Request> draw(std::mt19937_64& rng, const Options& o, size_t nodes) {
  auto uniform = [&](unsigned lo, unsigned hi) { return std::uniform_int_distribution<unsigned>(lo, hi)(rng); };
  Request r;
  unsigned pick = uniform(0, 99);
  auto whole_nodes = [&](unsigned n) {
    r.nnodes = std::max(1u, std::min<unsigned>(n, static_cast<unsigned>(nodes / 4)));
    r.ntasks = r.nnodes * o.cores;
    r.exclusive = uniform(0, 99) < 30;
  };
  if (pick < 40) {
    r.ntasks = 1;
    return {"core", r};
  }
  if (pick < 55) {
    r.ntasks = uniform(2, 32);
    return {"cores", r};
  }
  if (pick < 75) {
    whole_nodes(1);
    return {"node", r};
  }
  if (pick < 95) {
    whole_nodes(uniform(2, 16));
    return {"nodes_2_16", r};
  }
  // 64-1024 nodes, log-uniform.
  double e = std::uniform_real_distribution<double>(6.0, 10.0)(rng);
  whole_nodes(static_cast<unsigned>(std::pow(2.0, e)));
  return {"nodes_64_1024", r};
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Forwards to the topology's placer, counting the time spent in it (backfill pass report).
class TimedPlacer final : public Placer {
 public:
  explicit TimedPlacer(std::unique_ptr<Placer> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  void node_added(uint32_t n, const std::string& name, const NodeState& st) override {
    inner_->node_added(n, name, st);
  }
  // Timing every call would cost as much as the call: one in 16 is timed and scaled.
  void node_changed(uint32_t n, const NodeState& st) override {
    if (++changes % 16 != 0) {
      inner_->node_changed(n, st);
      return;
    }
    auto t0 = Clock::now();
    inner_->node_changed(n, st);
    changed_s += 16 * seconds_since(t0);
  }
  unsigned fewest_leaves(const Request& r) const override { return inner_->fewest_leaves(r); }
  std::optional<Allocation> place(const Request& r, const std::vector<NodeState>& nodes) const override {
    auto t0 = Clock::now();
    auto a = inner_->place(r, nodes);
    place_s += seconds_since(t0);
    ++places;
    return a;
  }
  std::optional<Allocation> place_indexed(const Request& r, const std::vector<NodeState>& nodes,
                                          const corral::topology::FreeCoreIndex& index) const override {
    auto t0 = Clock::now();
    auto a = inner_->place_indexed(r, nodes, index);
    place_s += seconds_since(t0);
    ++places;
    return a;
  }
  void reset() { changed_s = place_s = 0, changes = places = 0; }

  // Mutable: place() is const, the tally is the benchmark's, not the placer's.
  mutable double place_s = 0;
  mutable uint64_t places = 0;
  double changed_s = 0;
  uint64_t changes = 0;

 private:
  std::unique_ptr<Placer> inner_;
};

struct Machine {
  TimedPlacer* timed = nullptr;  // owned by sched
  Scheduler sched;
  uint64_t total_cores = 0;
  uint64_t next_id = 1;
  double now = 0;
  std::vector<uint64_t> running;

  Machine(const Topology& topo, unsigned cores) : sched(timed_placer(topo)) {
    for (const auto& n : topo.all_nodes()) {
      sched.add_node(NodeConfig{n, cores, 0, 0});
      total_cores += cores;
    }
  }
  std::unique_ptr<Placer> timed_placer(const Topology& topo) {
    auto p = std::make_unique<TimedPlacer>(corral::topology::make_placer(topo));
    timed = p.get();
    return p;
  }
  uint64_t busy_cores() const {
    uint64_t free = 0;
    for (uint32_t n = 0; n < sched.node_count(); ++n) free += sched.node_state(n).free_cores.count();
    return total_cores - free;
  }
  std::vector<NodeState> snapshot() const {
    std::vector<NodeState> out;
    out.reserve(sched.node_count());
    for (uint32_t n = 0; n < sched.node_count(); ++n) out.push_back(sched.node_state(n));
    return out;
  }
};

// Fills to `busy` through the scheduler: batches of jobs with time limits, then a few rounds
// of releasing a random fifth of the running jobs and filling again (fragmentation).
void fill(Machine& m, const Options& o, std::mt19937_64& rng) {
  auto fill_up = [&] {
    uint64_t busy = m.busy_cores();
    for (int batch = 0; batch < 200 && busy < o.busy * static_cast<double>(m.total_cores); ++batch) {
      std::vector<uint64_t> batch_ids;
      for (int i = 0; i < 64; ++i) {
        auto [cls, r] = draw(rng, o, m.sched.node_count());
        r.jobid = m.next_id++;
        batch_ids.push_back(r.jobid);
        double limit = 600.0 * std::uniform_int_distribution<int>(1, 48)(rng);
        m.sched.enqueue(PendingJob{r, 16, r.jobid, limit});
      }
      std::vector<std::pair<uint64_t, uint64_t>> started;  // (job, cores)
      for (const auto& d : m.sched.schedule(m.now)) {
        uint64_t cores = 0;
        for (const auto& s : d.alloc.shares) cores += s.cores.count();
        started.emplace_back(d.jobid, cores);
        busy += cores;
      }
      // One pass may overshoot the target: the last started go again.
      while (!started.empty() && busy > o.busy * static_cast<double>(m.total_cores)) {
        m.sched.release(started.back().first);
        busy -= started.back().second;
        started.pop_back();
      }
      for (const auto& [id, cores] : started) m.running.push_back(id);
      // Whatever did not start is dropped: the fill is about the running mix.
      for (uint64_t id : batch_ids) m.sched.dequeue(id);
      busy = m.busy_cores();
    }
  };
  fill_up();
  for (int round = 0; round < 3; ++round) {
    std::shuffle(m.running.begin(), m.running.end(), rng);
    size_t drop = m.running.size() / 5;
    for (size_t i = 0; i < drop; ++i) m.sched.release(m.running[i]);
    m.running.erase(m.running.begin(), m.running.begin() + static_cast<long>(drop));
    m.now += 60;
    fill_up();
  }
}

json percentiles(std::vector<double> us) {
  if (us.empty()) return json::object();
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    size_t i = std::min(us.size() - 1, static_cast<size_t>(q * static_cast<double>(us.size())));
    return us[i];
  };
  auto round2 = [](double v) { return std::round(v * 100) / 100; };
  return {{"count", us.size()},
          {"median_us", round2(at(0.5))},
          {"p90_us", round2(at(0.9))},
          {"p99_us", round2(at(0.99))},
          {"max_us", round2(us.back())}};
}

// The properties of --properties: what an Infiniband node with two dual-port cards
// offers, with the required one missing on a (1 - F) share of the nodes.
constexpr const char* kRequired = "ib:IbFabric2/MT28908 Family [ConnectX-6]/0";

corral::sched::NodeProperties make_properties(size_t nodes, double fraction, std::mt19937_64& rng) {
  corral::sched::NodeProperties props;
  std::uniform_real_distribution<double> u(0, 1);
  for (uint32_t n = 0; n < nodes; ++n) {
    std::vector<std::string> names{"ib:IbFabric1/MT28908 Family [ConnectX-6]/0",
                                   "ib:IbFabric1/MT28908 Family [ConnectX-6]/1",
                                   "ib:IbFabric2/MT28908 Family [ConnectX-6]/1", "gpu:H100"};
    if (u(rng) < fraction) names.push_back(kRequired);
    bool changed = false;
    props.set(n, names, &changed);
  }
  return props;
}

json time_decisions(const Machine& m, const Options& o, std::mt19937_64& rng) {
  const std::vector<NodeState> states = m.snapshot();
  corral::topology::FreeCoreIndex index;
  for (uint32_t n = 0; n < states.size(); ++n) index.update(n, states[n]);
  const Placer& placer = m.sched.placer(0);
  std::vector<double> all, cpu;
  std::map<std::string, std::vector<double>> by_class;
  std::map<std::string, unsigned> placed;
  std::vector<uint32_t> members(states.size());
  for (uint32_t n = 0; n < members.size(); ++n) members[n] = n;
  const auto props = make_properties(o.properties > 0 ? states.size() : 0, o.properties, rng);
  const std::vector<std::string> required{kRequired};
  // The controller narrows a job's nodes once, when it plans the job, not at every
  // placement: both costs are reported.
  std::vector<double> filter_us;
  std::vector<uint32_t> allowed;
  if (o.properties > 0)
    for (int k = 0; k < 20; ++k) {
      auto f0 = Clock::now();
      allowed = props.filter(members, required);
      filter_us.push_back(seconds_since(f0) * 1e6);
    }
  for (unsigned i = 0; i < o.decisions; ++i) {
    auto [cls, r] = draw(rng, o, states.size());
    r.jobid = 1u << 30 | i;
    // As Controller::restrict_to_properties planned it: the nodes that offer what the job
    // requires.
    if (o.properties > 0) {
      r.allowed_nodes = allowed;
      r.allowed_sorted = true;
    }
    double cpu0 = thread_cpu_seconds();
    auto t0 = Clock::now();
    auto alloc = placer.place_indexed(r, states, index);
    double us = seconds_since(t0) * 1e6;
    cpu.push_back((thread_cpu_seconds() - cpu0) * 1e6);
    all.push_back(us);
    by_class[cls].push_back(us);
    placed[cls] += alloc ? 1 : 0;
  }
  json out = percentiles(all);
  if (!filter_us.empty()) out["property_filter"] = percentiles(filter_us);
  // CPU time of the deciding thread: what the decision costs when the machine is shared.
  out["cpu"] = percentiles(cpu);
  for (auto& [cls, v] : by_class) {
    json c = percentiles(v);
    c["placed"] = placed[cls];
    out["by_class"][cls] = c;
  }
  return out;
}

// Job sizes on an empty machine: does each get the fewest leaves the placer says it could?
json empty_machine_check(const Topology& topo, const Options& o) {
  Machine m(topo, o.cores);
  const Placer& placer = m.sched.placer(0);
  const std::vector<NodeState> states = m.snapshot();
  corral::topology::FreeCoreIndex index;
  for (uint32_t n = 0; n < states.size(); ++n) index.update(n, states[n]);
  const bool spreads = topo.kind == corral::topology::Kind::dragonfly;
  std::vector<Request> jobs;
  auto job = [](unsigned nnodes, unsigned ntasks, bool exclusive) {
    Request r;
    r.nnodes = nnodes;
    r.ntasks = ntasks;
    r.exclusive = exclusive;
    return r;
  };
  for (unsigned t : {1u, 2u, 16u, o.cores}) jobs.push_back(job(0, t, false));
  std::vector<unsigned> sizes;
  for (unsigned n = 1; n <= 16; ++n) sizes.push_back(n);
  for (unsigned n = 17; n <= 2048; n = n * 5 / 4 + 1) sizes.push_back(n);
  for (unsigned n : {32u, 64u, 100u, 128u, 256u, 512u, 1000u, 1024u}) sizes.push_back(n);
  for (unsigned n : sizes) {
    if (n > states.size()) continue;
    for (bool excl : {false, true}) {
      jobs.push_back(job(n, n * o.cores, excl));
      jobs.push_back(job(n, n, excl));
    }
    jobs.push_back(job(0, n * o.cores, false));  // n nodes' worth of tasks, no node count
  }
  unsigned checked = 0, violations = 0, unplaced = 0, spread = 0;
  json examples = json::array();
  for (const Request& r : jobs) {
    unsigned fewest = placer.fewest_leaves(r);
    auto alloc = placer.place_indexed(r, states, index);
    if (!alloc) {
      ++unplaced;
      continue;
    }
    if (fewest == 0) continue;  // flat and torus placers do not count leaves
    if (spreads && fewest > 1) {
      ++spread;
      continue;
    }
    ++checked;
    if (alloc->leaves != fewest) {
      ++violations;
      if (examples.size() < 5)
        examples.push_back({{"nnodes", r.nnodes},
                            {"ntasks", r.ntasks},
                            {"exclusive", r.exclusive},
                            {"fewest", fewest},
                            {"got", alloc->leaves}});
    }
  }
  return {{"jobs", jobs.size()},  {"checked", checked},          {"violations", violations},
          {"unplaced", unplaced}, {"spread_on_purpose", spread}, {"violation_examples", examples}};
}

json backfill_pass(Machine& m, const Options& o, std::mt19937_64& rng) {
  for (unsigned i = 0; i < o.pending; ++i) {
    auto [cls, r] = draw(rng, o, m.sched.node_count());
    r.jobid = m.next_id++;
    double limit = 600.0 * std::uniform_int_distribution<int>(1, 48)(rng);
    m.sched.enqueue(PendingJob{r, 16, r.jobid, limit});
  }
  m.now += 60;
  m.timed->reset();
  double cpu0 = thread_cpu_seconds();
  auto t0 = Clock::now();
  auto started = m.sched.schedule(m.now);
  double ms = seconds_since(t0) * 1e3;
  double cpu_ms = (thread_cpu_seconds() - cpu0) * 1e3;
  auto round1 = [](double v) { return std::round(v * 10) / 10; };
  return {{"pending", o.pending},
          {"pass_ms", round1(ms)},
          {"pass_cpu_ms", round1(cpu_ms)},
          {"placer_calls", m.timed->places},
          {"placer_ms", round1(m.timed->place_s * 1e3)},
          {"node_changes", m.timed->changes},
          {"node_changed_ms", round1(m.timed->changed_s * 1e3)},
          {"started", started.size()},
          {"still_pending", m.sched.pending_count()},
          {"busy_after", static_cast<double>(m.busy_cores()) / static_cast<double>(m.total_cores)}};
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  std::mt19937_64 rng(o.seed);
  auto t0 = Clock::now();
  Topology topo = make_topology(o);
  double build_s = seconds_since(t0);
  t0 = Clock::now();
  Machine m(topo, o.cores);
  double nodes_s = seconds_since(t0);
  t0 = Clock::now();
  fill(m, o, rng);
  double fill_s = seconds_since(t0);
  json out;
  out["topology"] = o.topology == "file" ? o.file : o.topology;
  out["kind"] = std::string(corral::topology::kind_name(topo.kind));
  out["placer"] = m.sched.placer(0).name();
  out["timing"] = "steady_clock around each call; the placer is wrapped to tally its share";
  out["nodes"] = m.sched.node_count();
  out["leaves"] = leaf_count(topo);
  out["cores_per_node"] = o.cores;
  out["busy_fraction"] =
      std::round(1000.0 * static_cast<double>(m.busy_cores()) / static_cast<double>(m.total_cores)) / 1000.0;
  out["running_jobs"] = m.running.size();
  out["setup_seconds"] = {{"topology", build_s}, {"add_nodes", nodes_s}, {"fill", fill_s}};
  if (o.backfill) {
    out["mode"] = "backfill_pass";
    out["backfill"] = backfill_pass(m, o, rng);
  } else {
    out["mode"] = "decisions";
    out["method"] = "Placer::place_indexed on a snapshot of the busy pool; not committed";
    if (o.properties > 0)
      out["properties"] = {
          {"required", kRequired},
          {"nodes_offering", o.properties},
          {"method",
           "NodeProperties::filter of all nodes once (decisions.property_filter), then each decision with "
           "the allowed nodes"}};
    out["decisions"] = time_decisions(m, o, rng);
    out["empty_machine"] = empty_machine_check(topo, o);
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}
