// Thin glue: read the environment, open the device, call node_ops, print, pick the exit code.
#include "fabric/slingshot/tool_commands.h"

#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string_view>

#include <fmt/format.h>

#include "fabric/slingshot/cxi_device.h"
#include "fabric/slingshot/node_ops.h"
#include "fabric/slingshot/sim_cxi.h"
#include "fabric/slingshot/slingshot_env.h"
#include "util/idset.h"

namespace corral::fabric::slingshot::tool {

namespace {

int bad_input(const std::string& msg) {
  std::cerr << "error: " << msg << "\n";
  return kExitBadInput;
}

// A device error before anything changed: bad input when the caller can fix it.
int device_error(const Error& e) {
  std::cout << "error: " << e.message << "\n";
  return e.code == Errc::invalid_argument ? kExitBadInput : kExitFailed;
}

Result<std::string> require_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return invalid(fmt::format("{} is not set", name));
  return std::string(v);
}

Result<uint32_t> parse_u32(const std::string& text, const char* what) {
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return invalid(fmt::format("{}='{}' is not a non-negative integer", what, text));
  return v;
}

Result<uint32_t> env_u32(const char* name) {
  auto v = require_env(name);
  if (!v) return v.error();
  return parse_u32(*v, name);
}

Result<std::vector<uint16_t>> env_vnis() {
  auto v = require_env("CORRAL_SLINGSHOT_VNIS");
  if (!v) return v.error();
  auto vnis = parse_vni_list(*v);
  if (!vnis) return invalid("CORRAL_SLINGSHOT_VNIS: " + vnis.message());
  if (vnis->size() > 4)
    return invalid(fmt::format("CORRAL_SLINGSHOT_VNIS: {} VNIs, a CXI service allows at most 4", vnis->size()));
  return vnis;
}

Result<std::unique_ptr<CxiDevice>> open(const Target& t) {
  if (t.cxi.empty()) return invalid("no CXI backend: set CORRAL_CXI or pass --cxi (sim:DIR[:CONFIG], libcxi, none)");
  if (t.node.empty()) return invalid("no node name: set CORRAL_NODENAME or pass --node");
  return open_cxi_device(t.cxi, t.node);
}

std::string vni_text(const Service& s) { return format_vni_list(s.desc.vnis); }

// Shared by epilog and clean.
int report_destroy(const Result<DestroyOutcome>& r) {
  if (!r) return device_error(r.error());
  for (const auto& p : r->failed) std::cout << "error: " << (p.nic.empty() ? "" : p.nic + ": ") << p.error << "\n";
  for (const auto& p : r->busy)
    std::cout << fmt::format("busy: {} service {} (VNIs {})\n", p.nic, p.svc.id, vni_text(p.svc));
  if (!r->failed.empty()) return kExitFailed;
  return r->busy.empty() ? kExitOk : kExitBusy;
}

int destroy(const Target& t, const std::function<bool(const Service&)>& match, double retry_for) {
  if (retry_for < 0) return bad_input("--retry-for must not be negative");
  auto dev = open(t);
  if (!dev) return device_error(dev.error());
  DestroyOptions opts;
  opts.retry_for = retry_for;
  return report_destroy(destroy_matching(**dev, match, opts));
}

}  // namespace

int prolog(const Target& t) {
  auto vnis = env_vnis();
  if (!vnis) return bad_input(vnis.message());
  if (vnis->empty()) return bad_input("CORRAL_SLINGSHOT_VNIS is empty: the job has no VNIs to create services for");
  auto uid = env_u32("CORRAL_SLINGSHOT_UID");
  if (!uid) return bad_input(uid.message());
  auto ncores = env_u32("CORRAL_SLINGSHOT_NCORES");
  if (!ncores) return bad_input(ncores.message());
  auto dev = open(t);
  if (!dev) return device_error(dev.error());
  auto r = run_prolog(**dev, PrologRequest{*vnis, *uid, *ncores});
  if (!r) return device_error(r.error());
  for (const auto& w : r->warnings) std::cout << "warning: " << w.nic << ": " << w.text << "\n";
  for (const auto& e : r->errors) std::cout << "error: " << e.nic << ": " << e.text << "\n";
  return r->ok ? kExitOk : kExitFailed;
}

int epilog(const Target& t, double retry_for) {
  auto vnis = env_vnis();
  if (!vnis) return bad_input(vnis.message());
  if (vnis->empty()) return bad_input("CORRAL_SLINGSHOT_VNIS is empty: the job has no VNIs to clean up");
  // The VNIs identify the job's services; the uid, when given, must at least be valid.
  if (std::getenv("CORRAL_SLINGSHOT_UID"))
    if (auto uid = env_u32("CORRAL_SLINGSHOT_UID"); !uid) return bad_input(uid.message());
  return destroy(t, epilog_match(*vnis), retry_for);
}

int clean(const Target& t, const std::string& vnis, double retry_for) {
  auto pool = IdSet::parse(vnis);
  if (!pool) return bad_input("--vnis '" + vnis + "': " + pool.message());
  if (pool->empty()) return bad_input("--vnis is empty: name the VNI pool, e.g. 1024-65535");
  return destroy(t, clean_match([p = *pool](uint16_t v) { return p.contains(v); }), retry_for);
}

int list(const Target& t, bool json) {
  auto dev = open(t);
  if (!dev) return device_error(dev.error());
  auto nics = (*dev)->list();
  if (!nics) return device_error(nics.error());
  std::cout << (json ? format_nics_json(t.node, *nics) + "\n" : format_nics_text(t.node, *nics));
  return kExitOk;
}

int use(const Target& t, const UseArgs& a) {
  auto tc = parse_tc(a.tc);
  if (!tc) return bad_input("--tc: " + tc.message());
  if (a.vni > UINT16_MAX) return bad_input(fmt::format("--vni {}: VNIs go from 0 to 65535", a.vni));
  auto dev = open(t);
  if (!dev) return device_error(dev.error());
  auto* sim = dynamic_cast<SimCxiDevice*>(dev->get());
  if (!sim) return bad_input("use works with simulated NICs only (--cxi sim:DIR); '" + t.cxi + "' is not one");
  const uint32_t uid = a.uid ? *a.uid : ::getuid();
  if (auto st = sim->use(a.device, a.svc, static_cast<uint16_t>(a.vni), *tc, uid); !st) {
    std::cout << st.message() << "\n";
    return st.error().code == Errc::invalid_argument ? kExitBadInput : kExitFailed;
  }
  std::cout << "ok\n";
  return kExitOk;
}

}  // namespace corral::fabric::slingshot::tool
