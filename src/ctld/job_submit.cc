// Admission: jobspecs are parsed and checked against the cluster and the hooks before
// anything is stored, so a bad request changes nothing.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "ctld/controller.h"
#include "job/dependency.h"
#include "placers/placers.h"
#include "util/hostlist.h"
#include "util/idset.h"
#include "util/units.h"

namespace corral::ctld {

using nlohmann::json;

namespace {

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
  return s;
}

constexpr size_t kMaxJobsPerSubmit = 1'000'000;

}  // namespace

Result<std::vector<std::shared_ptr<const job::Jobspec>>> Controller::parse_submission(
    const v1::SubmitRequest& req) const {
  std::vector<std::shared_ptr<const job::Jobspec>> specs;
  if (req.jobspecs_size() == 0) return invalid("submit: no jobspec given");
  if (auto st = check_sizes(req); !st) return st.error();
  if (!req.cc().empty()) {
    if (req.jobspecs_size() != 1) return invalid("submit: --cc takes exactly one jobspec");
    auto ids = IdSet::parse(req.cc());
    if (!ids) return invalid("--cc: " + ids.message());
    if (ids->count() > kMaxJobsPerSubmit)
      return invalid(fmt::format("--cc: at most {} jobs per submission", kMaxJobsPerSubmit));
    const std::string& text = req.jobspecs(0);
    bool templated = text.find("{cc}") != std::string::npos;
    std::shared_ptr<const job::Jobspec> shared;
    for (uint32_t id : ids->to_vector()) {
      if (!templated && shared) {
        specs.push_back(shared);
        continue;
      }
      auto spec = job::parse_jobspec(templated ? replace_all(text, "{cc}", std::to_string(id)) : text);
      if (!spec) return invalid("jobspec: " + spec.message());
      auto p = std::make_shared<const job::Jobspec>(std::move(*spec));
      if (!templated) shared = p;
      specs.push_back(std::move(p));
    }
    return specs;
  }
  for (int i = 0; i < req.jobspecs_size(); ++i) {
    auto spec = job::parse_jobspec(req.jobspecs(i));
    if (!spec)
      return invalid(req.jobspecs_size() == 1 ? "jobspec: " + spec.message()
                                              : fmt::format("jobspec {}: {}", i, spec.message()));
    specs.push_back(std::make_shared<const job::Jobspec>(std::move(*spec)));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i]->batch_script.size() <= cfg_.limits.max_batch_script) continue;
    return invalid(fmt::format("{}the batch script has {} bytes, more than the {} allowed (limits.max-batch-script)",
                               specs.size() == 1 ? "" : fmt::format("jobspec {}: ", i), specs[i]->batch_script.size(),
                               cfg_.limits.max_batch_script));
  }
  return specs;
}

// Sizes are checked before anything is parsed: a parse costs time and memory in
// proportion to its input.
Status Controller::check_sizes(const v1::SubmitRequest& req) const {
  if (req.jobspecs_size() > static_cast<int>(kMaxJobsPerSubmit))
    return invalid(fmt::format("submit: at most {} jobspecs per submission", kMaxJobsPerSubmit));
  for (int i = 0; i < req.jobspecs_size(); ++i) {
    if (req.jobspecs(i).size() <= cfg_.limits.max_jobspec) continue;
    return invalid(fmt::format("{}the jobspec has {} bytes, more than the {} allowed (limits.max-jobspec)",
                               req.jobspecs_size() == 1 ? "" : fmt::format("jobspec {}: ", i), req.jobspecs(i).size(),
                               cfg_.limits.max_jobspec));
  }
  if (req.cc().size() > 4096) return invalid("--cc: the id list is longer than 4096 characters");
  return {};
}

std::string Controller::partition_of(const job::Jobspec& spec) const {
  return spec.partition.empty() ? nodes_.default_partition() : spec.partition;
}

Result<topology::Request> Controller::make_request(const job::Jobspec& spec, uint64_t jobid, bool* restricted) const {
  topology::Request r;
  r.jobid = jobid;
  r.nnodes = spec.nnodes;
  r.ntasks = spec.ntasks;
  r.cores_per_task = spec.cores_per_task;
  r.gpus_per_task = spec.gpus_per_task;
  r.mem_per_node_mb = spec.mem_per_node_mb;
  r.exclusive = spec.exclusive;
  std::string part = partition_of(spec);
  const std::vector<uint32_t>* members = nodes_.partition(part);
  if (members == nullptr) {
    const std::string names = nodes_.partition_names();
    return invalid(fmt::format("partition '{}' does not exist (partitions: {})", part, names.empty() ? "none" : names));
  }
  r.placer = routing_.placer_of(part);
  r.max_leaves = spec.switches;
  auto exclude = routing_.expand_nodes(spec.excluded_nodes, part);
  if (!exclude) return invalid("exclude: " + exclude.message());
  auto nodelist = routing_.expand_nodes(spec.requested_nodes, part);
  if (!nodelist) return invalid("nodelist: " + nodelist.message());
  std::set<uint32_t> excluded;
  if (!exclude->empty()) {
    auto hl = Hostlist::parse(*exclude);
    if (!hl) return invalid("exclude: " + hl.message());
    for (const auto& h : hl->hosts())
      if (auto i = sched_.node_index(h)) excluded.insert(*i);
  }
  // A partition of every node without exclusions allows any node: no list (a list of
  // 100,000 nodes in every job costs memory and sends placement down its slow path).
  if (!excluded.empty() || members->size() != sched_.node_count())
    for (uint32_t i : *members)
      if (!excluded.count(i)) r.allowed_nodes.push_back(i);
  r.allowed_sorted = true;  // the partition's members are ascending, and filtering keeps their order
  if (auto st = restrict_to_properties(spec, *members, part, r, restricted); !st.ok()) return st.error();
  if (!nodelist->empty()) {
    auto hl = Hostlist::parse(*nodelist);
    if (!hl) return invalid("nodelist: " + hl.message());
    const Hostlist wanted = hl->uniq();
    for (const auto& h : wanted.hosts()) {
      auto i = sched_.node_index(h);
      if (!i) return invalid(fmt::format("requested node {} does not exist", h));
      if (excluded.count(*i)) return invalid(fmt::format("node {} is both requested and excluded", h));
      if (!std::count(members->begin(), members->end(), *i))
        return invalid(fmt::format("requested node {} is not in partition {}", h, part));
      r.required_nodes.push_back(*i);
    }
    const topology::Topology* topo = routing_.topology_of(part);
    if (auto why = topology::block_request_error(r); why && topo && topo->kind == topology::Kind::block)
      return invalid(*why);
    // A node list from switch{}/block{} functions is only known here; like a plain -w
    // without -N, it sets the node count (one task per node unless more were asked for).
    const auto named = static_cast<unsigned>(r.required_nodes.size());
    if (*nodelist != spec.requested_nodes && r.nnodes < named) {
      r.nnodes = named;
      r.ntasks = std::max(r.ntasks, named);
    }
  }
  return r;
}

// What the hooks need of every node (an Infiniband device, say) narrows the allowed nodes.
// At submit (jobid 0) none left is an error; a queued job waits for a node to offer them.
Status Controller::restrict_to_properties(const job::Jobspec& spec, const std::vector<uint32_t>& members,
                                          const std::string& part, topology::Request& r, bool* restricted) const {
  std::vector<std::string> required;
  for (const auto& h : hooks_)
    if (auto st = h->required_properties(spec, required); !st.ok()) return st;
  if (restricted) *restricted = !required.empty();
  if (required.empty()) return {};
  std::sort(required.begin(), required.end());
  required.erase(std::unique(required.begin(), required.end()), required.end());
  r.allowed_nodes = node_props_.filter(r.allowed_nodes.empty() ? members : r.allowed_nodes, required);
  if (r.allowed_nodes.empty()) return not_offered(r, part, required);
  if (r.allowed_nodes.size() == sched_.node_count()) r.allowed_nodes.clear();  // every node offers them
  return {};
}

Status Controller::not_offered(topology::Request& r, const std::string& part,
                               const std::vector<std::string>& required) const {
  if (r.jobid == 0)
    return invalid(fmt::format("no node of partition {} offers {}", part, fmt::join(required, " and ")));
  r.allowed_nodes = {topology::kNoNode};
  return {};
}

double Controller::effective_time_limit(const job::Jobspec& spec) const {
  if (spec.duration > 0) return spec.duration;
  return cfg_.default_time_limit > 0 ? cfg_.default_time_limit : cfg_.max_time_limit;
}

Status Controller::admit(const Caller& c, const job::Jobspec& spec) {
  double limit = effective_time_limit(spec);
  if (cfg_.max_time_limit > 0 && limit > cfg_.max_time_limit)
    return invalid(fmt::format("time limit {} exceeds the maximum of {}", format_duration(limit),
                               format_duration(cfg_.max_time_limit)));
  if (spec.requeue.value_or(false) && (spec.alloc || spec.output.path.empty()))
    return invalid(
        "--requeue: an allocation (corral alloc) or a job whose output goes to its client (corral run) "
        "cannot run again; use corral batch, or corral submit with -o FILE");
  // Hooks first: their reasons (an unknown device, say) say more than "no node offers it".
  for (auto& h : hooks_)
    if (auto st = h->validate(*this, spec, c.uid); !st.ok()) return st;
  auto req = make_request(spec, 0);
  if (!req) return req.error();
  if (auto why = sched_.unsatisfiable(*req)) return invalid("unsatisfiable request: " + *why);
  return {};
}

uint64_t Controller::create_job(const Caller& c, std::shared_ptr<const job::Jobspec> spec, unsigned urgency) {
  auto rec = std::make_unique<JobRecord>();
  rec->id = next_id_++;
  rec->userid = c.uid;
  rec->groupid = c.gid;
  if (spec->duration == 0 && effective_time_limit(*spec) > 0) {
    // The default limit becomes part of the stored jobspec, so replay sees the same job.
    // Copies of one submission share the rewritten jobspec too.
    if (spec != last_limited_from_) {
      last_limited_from_ = spec;
      auto doc = *spec->document;
      doc["attributes"]["system"]["duration"] = effective_time_limit(*spec);
      auto s2 = job::jobspec_from_document(doc);
      last_limited_ = s2 ? std::make_shared<const job::Jobspec>(std::move(*s2)) : spec;
    }
    spec = last_limited_;
  }
  // Copies of one jobspec (--cc) share their document: serialize it once.
  if (spec->document != last_doc_) {
    last_doc_ = spec->document;
    last_doc_text_ = std::make_shared<const std::string>(job::jobspec_to_string(*spec));
  }
  rec->jobspec_text = last_doc_text_;
  rec->interactive = spec->output.path.empty();
  rec->partition = partition_of(*spec);
  rec->spec = std::move(spec);
  rec->unsaved = true;
  uint64_t id = rec->id;
  store_->insert_job(id, c.uid, rec->jobspec_text);
  jobs_.emplace(id, std::move(rec));  // counted by the caller (UserLimits::jobs_added)
  json ctx{{"userid", c.uid}, {"urgency", urgency}, {"flags", 0}, {"version", 1}, {"groupid", c.gid}};
  post(id, job::make_event("submit", ctx.dump()));
  post(id, job::make_event("validate"));
  return id;
}

}  // namespace corral::ctld
