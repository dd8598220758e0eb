#include "fabric/slingshot/node_ops.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fabric/slingshot/cxi_resources.h"
#include "fabric/slingshot/slingshot_env.h"

namespace corral::fabric::slingshot {

namespace {

bool is_exact_job_service(const Service& s, const PrologRequest& req) {
  return is_job_service(s, req.vnis, req.uid) && s.desc.member_uids == std::vector<uint32_t>{req.uid};
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// Destroys what this prolog created; what cannot be destroyed is reported, not hidden.
void roll_back(CxiDevice& dev, PrologOutcome& out) {
  for (const auto& [nic, id] : out.created)
    if (auto st = dev.destroy_service(nic, id); !st)
      out.errors.push_back({nic, fmt::format("rolling back: cannot destroy service {}: {}", id, st.message())});
  out.created.clear();
}

}  // namespace

ServiceDesc job_service_desc(const PrologRequest& req, const Limits& limits) {
  ServiceDesc d;
  d.member_uids = {req.uid};
  d.vnis = req.vnis;
  d.tcs = kTcBestEffort | kTcLowLatency;
  d.limited = true;
  d.limits = limits;
  return d;
}

Result<PrologOutcome> run_prolog(CxiDevice& dev, const PrologRequest& req) {
  auto nics = dev.list();
  if (!nics) return nics.error();
  PrologOutcome out;
  const Limits desired = desired_limits(req.ncores);
  for (const auto& nic : *nics) {
    auto have = std::find_if(nic.services.begin(), nic.services.end(),
                             [&](const Service& s) { return is_exact_job_service(s, req); });
    if (have != nic.services.end()) {
      out.existing.emplace_back(nic.name, have->id);
      continue;
    }
    FittedLimits fit = fit_limits(desired, nic);
    auto id = dev.alloc_service(nic.name, job_service_desc(req, fit.limits));
    if (!id) {
      out.ok = false;
      out.errors.push_back({nic.name, id.message()});
      roll_back(dev, out);
      return out;
    }
    out.created.emplace_back(nic.name, *id);
    if (!fit.warnings.empty())
      out.warnings.push_back(
          {nic.name, fmt::format("NIC short of resources, service {} scaled back: {}", *id, join(fit.warnings, "; "))});
  }
  return out;
}

std::function<bool(const Service&)> epilog_match(std::vector<uint16_t> vnis) {
  return [vnis = std::move(vnis)](const Service& s) { return !s.desc.system && same_vni_set(s.desc, vnis); };
}

std::function<bool(const Service&)> clean_match(std::function<bool(uint16_t)> in_pool) {
  return [in_pool = std::move(in_pool)](const Service& s) {
    return !s.desc.system && !s.desc.vnis.empty() && std::all_of(s.desc.vnis.begin(), s.desc.vnis.end(), in_pool);
  };
}

namespace {

double monotonic_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void sleep_for(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

using SvcKey = std::pair<std::string, uint32_t>;

// One pass over the NICs: destroys what matches, returns the busy ones.
Result<std::vector<PendingService>> destroy_pass(CxiDevice& dev, const std::function<bool(const Service&)>& match,
                                                 DestroyOutcome& out, std::set<SvcKey>& given_up) {
  auto nics = dev.list();
  if (!nics) return nics.error();
  std::vector<PendingService> busy;
  for (const auto& nic : *nics)
    for (const auto& svc : nic.services) {
      if (!match(svc) || given_up.count({nic.name, svc.id})) continue;
      Status st = dev.destroy_service(nic.name, svc.id);
      if (st || st.error().code == Errc::not_found) {  // gone: someone else was faster
        out.destroyed.emplace_back(nic.name, svc.id);
      } else if (st.error().code == Errc::unavailable) {
        busy.push_back({nic.name, svc, st.message()});
      } else {
        out.failed.push_back({nic.name, svc, st.message()});
        given_up.insert({nic.name, svc.id});
      }
    }
  return busy;
}

}  // namespace

Result<DestroyOutcome> destroy_matching(CxiDevice& dev, const std::function<bool(const Service&)>& match,
                                        const DestroyOptions& opts) {
  const auto now = opts.now ? opts.now : monotonic_now;
  const auto sleep = opts.sleep ? opts.sleep : sleep_for;
  const double deadline = now() + opts.retry_for;
  DestroyOutcome out;
  std::set<SvcKey> given_up;
  for (bool first = true;; first = false) {
    auto busy = destroy_pass(dev, match, out, given_up);
    if (!busy) {
      if (first) return busy.error();
      out.failed.push_back({"", Service{}, busy.message()});
      return out;
    }
    out.busy = std::move(*busy);
    const double left = deadline - now();
    if (out.busy.empty() || left <= 0) return out;
    sleep(std::min(opts.interval, left));
  }
}

// ---- listing -------------------------------------------------------------------------------

namespace {

std::vector<std::string> tc_names(uint32_t tcs) {
  std::vector<std::string> out;
  for (uint32_t bit : {kTcBestEffort, kTcLowLatency, kTcBulkData, kTcDedicatedAccess})
    if (tcs & bit) out.emplace_back(tc_name(bit));
  return out;
}

nlohmann::ordered_json limits_json(const Limits& l, bool with_reserved) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (size_t i = 0; i < kNumRsrc; ++i) {
    const char* name = rsrc_name(static_cast<Rsrc>(i));
    if (with_reserved)
      j[name] = {{"reserved", l[i].reserved}, {"max", l[i].max}};
    else
      j[name] = l[i].max;
  }
  return j;
}

std::string limits_text(const Limits& l) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < kNumRsrc; ++i)
    parts.push_back(fmt::format("{} {}/{}", rsrc_name(static_cast<Rsrc>(i)), l[i].reserved, l[i].max));
  return join(parts, ", ");
}

std::string numbers(const auto& v, const char* if_empty) {
  if (v.empty()) return if_empty;
  std::vector<std::string> s;
  for (auto x : v) s.push_back(std::to_string(x));
  return join(s, ",");
}

}  // namespace

std::string format_nics_json(const std::string& node, const std::vector<Nic>& nics) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& nic : nics) {
    nlohmann::ordered_json svcs = nlohmann::ordered_json::array();
    for (const auto& s : nic.services) {
      const ServiceDesc& d = s.desc;
      svcs.push_back({{"id", s.id},
                      {"system", d.system},
                      {"members", d.member_uids},
                      {"vnis", d.vnis},
                      {"tcs", tc_names(d.tcs == 0 ? 0xf : d.tcs)},
                      {"tcs_mask", format_tcs(d.tcs == 0 ? 0xf : d.tcs)},
                      {"limits", d.limited ? limits_json(d.limits, true) : nlohmann::ordered_json(nullptr)}});
    }
    arr.push_back({{"name", nic.name},
                   {"capacity", limits_json(nic.capacity, false)},
                   {"available", limits_json(available_limits(nic), false)},
                   {"services", svcs}});
  }
  return nlohmann::ordered_json{{"node", node}, {"nics", arr}}.dump(2);
}

std::string format_nics_text(const std::string& node, const std::vector<Nic>& nics) {
  if (nics.empty()) return fmt::format("{}: no Slingshot NICs\n", node);
  std::string out;
  for (const auto& nic : nics) {
    const Limits left = available_limits(nic);
    std::vector<std::string> cap;
    for (size_t i = 0; i < kNumRsrc; ++i)
      cap.push_back(fmt::format("{} {}/{}", rsrc_name(static_cast<Rsrc>(i)), left[i].max, nic.capacity[i].max));
    out += fmt::format("{} {}: free/capacity {}\n", node, nic.name, join(cap, ", "));
    for (const auto& s : nic.services) {
      const ServiceDesc& d = s.desc;
      out += fmt::format("  service {:<4} {:<6} vnis {:<20} members {:<12} tcs {}\n", s.id,
                         d.system ? "system" : "user", numbers(d.vnis, "any"), numbers(d.member_uids, "any"),
                         d.tcs == 0 ? "any" : join(tc_names(d.tcs), ","));
      if (d.limited) out += fmt::format("      reserved/max {}\n", limits_text(d.limits));
    }
  }
  return out;
}

}  // namespace corral::fabric::slingshot
