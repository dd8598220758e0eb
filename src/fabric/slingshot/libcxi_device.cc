// The CXI device interface on real Cassini NICs, through libcxi. Built as the module
// corral-cxi-libcxi.so only where libcxi's headers are installed, and loaded at run time
// by open_cxi_device("libcxi"), so corral itself never depends on libcxi. The module in
// turn loads libcxi.so.1 at run time (the build does not link it), which keeps a missing
// library an error message rather than a loader failure.
//
// Only header-only parts of corral are used here: the module is not linked with corral's
// libraries.
#include <dlfcn.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

// libcxi's headers use C extensions (anonymous structs, flexible array members).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include <libcxi/libcxi.h>
#pragma GCC diagnostic pop

#include "fabric/slingshot/cxi_device.h"

namespace corral::fabric::slingshot {

namespace {

static_assert(kNumRsrc == CXI_RSRC_TYPE_MAX, "corral's Rsrc must follow enum cxi_rsrc_type");
static_assert(static_cast<int>(Rsrc::PTE) == CXI_RSRC_TYPE_PTE && static_cast<int>(Rsrc::TXQ) == CXI_RSRC_TYPE_TXQ &&
                  static_cast<int>(Rsrc::TGQ) == CXI_RSRC_TYPE_TGQ && static_cast<int>(Rsrc::EQ) == CXI_RSRC_TYPE_EQ &&
                  static_cast<int>(Rsrc::CT) == CXI_RSRC_TYPE_CT && static_cast<int>(Rsrc::LE) == CXI_RSRC_TYPE_LE &&
                  static_cast<int>(Rsrc::TLE) == CXI_RSRC_TYPE_TLE && static_cast<int>(Rsrc::AC) == CXI_RSRC_TYPE_AC,
              "corral's Rsrc must follow enum cxi_rsrc_type");

// corral's TrafficClass bits <-> libcxi's tcs[] indices.
struct TcMap {
  uint32_t bit;
  int index;
};
constexpr TcMap kTcs[] = {{kTcDedicatedAccess, CXI_TC_DEDICATED_ACCESS},
                          {kTcLowLatency, CXI_TC_LOW_LATENCY},
                          {kTcBulkData, CXI_TC_BULK_DATA},
                          {kTcBestEffort, CXI_TC_BEST_EFFORT}};

struct DlCloser {
  void operator()(void* h) const {
    if (h) ::dlclose(h);
  }
};

// The libcxi functions corral calls, resolved from libcxi.so at run time.
struct Api {
  std::unique_ptr<void, DlCloser> lib;
  decltype(&cxil_get_device_list) get_device_list = nullptr;
  decltype(&cxil_free_device_list) free_device_list = nullptr;
  decltype(&cxil_open_device) open_device = nullptr;
  decltype(&cxil_close_device) close_device = nullptr;
  decltype(&cxil_get_svc_list) get_svc_list = nullptr;
  decltype(&cxil_free_svc_list) free_svc_list = nullptr;
  decltype(&cxil_alloc_svc) alloc_svc = nullptr;
  decltype(&cxil_destroy_svc) destroy_svc = nullptr;
};

template <class F>
bool resolve(void* lib, const char* name, F& out, std::string& err) {
  out = reinterpret_cast<F>(::dlsym(lib, name));
  if (!out) err = std::string("libcxi has no ") + name + " (too old a libcxi?)";
  return out != nullptr;
}

Result<std::shared_ptr<Api>> load_api() {
  auto api = std::make_shared<Api>();
  std::string first_error;  // the versioned name's: the one installations have
  for (const char* name : {"libcxi.so.1", "libcxi.so"}) {
    api->lib.reset(::dlopen(name, RTLD_NOW | RTLD_LOCAL));
    if (api->lib) break;
    const char* e = ::dlerror();
    if (first_error.empty()) first_error = e ? e : std::string(name) + ": not found";
  }
  if (!api->lib) return Error{Errc::unavailable, "cannot load libcxi: " + first_error};
  std::string err;
  void* l = api->lib.get();
  if (!resolve(l, "cxil_get_device_list", api->get_device_list, err) ||
      !resolve(l, "cxil_free_device_list", api->free_device_list, err) ||
      !resolve(l, "cxil_open_device", api->open_device, err) ||
      !resolve(l, "cxil_close_device", api->close_device, err) ||
      !resolve(l, "cxil_get_svc_list", api->get_svc_list, err) ||
      !resolve(l, "cxil_free_svc_list", api->free_svc_list, err) ||
      !resolve(l, "cxil_alloc_svc", api->alloc_svc, err) || !resolve(l, "cxil_destroy_svc", api->destroy_svc, err))
    return Error{Errc::unavailable, err};
  return api;
}

Error errno_error(int rc, const std::string& what) {
  const int e = rc < 0 ? -rc : rc;
  const std::string msg = what + ": " + std::strerror(e);
  switch (e) {
    case EBUSY:
    case ENOSPC:
    case EAGAIN:
      return Error{Errc::unavailable, msg};
    case EPERM:
    case EACCES:
      return Error{Errc::permission_denied, msg + " (creating CXI services needs root)"};
    case ENOENT:
    case ENODEV:
      return Error{Errc::not_found, msg};
    case EINVAL:
      return Error{Errc::invalid_argument, msg};
    default:
      return Error{Errc::io_error, msg};
  }
}

// One opened NIC; closed when the device goes away.
struct OpenNic {
  std::string name;
  Limits capacity{};
  cxil_dev* dev = nullptr;
};

ServiceDesc from_cxi(const cxi_svc_desc& d) {
  ServiceDesc out;
  if (d.restricted_members)
    for (const auto& m : d.members)
      if (m.type == CXI_SVC_MEMBER_UID) out.member_uids.push_back(static_cast<uint32_t>(m.svc_member.uid));
  if (d.restricted_vnis)
    for (unsigned i = 0; i < d.num_vld_vnis && i < CXI_SVC_MAX_VNIS; ++i) out.vnis.push_back(d.vnis[i]);
  if (d.restricted_tcs)
    for (const auto& t : kTcs)
      if (d.tcs[t.index]) out.tcs |= t.bit;
  out.limited = d.resource_limits;
  if (out.limited)
    for (size_t i = 0; i < kNumRsrc; ++i) out.limits[i] = {d.limits.type[i].res, d.limits.type[i].max};
  // The default service is the system's even where the driver does not flag it.
  out.system = d.is_system_svc || d.svc_id == CXI_DEFAULT_SVC_ID;
  return out;
}

uint16_t clamp16(uint32_t v) { return v > UINT16_MAX ? UINT16_MAX : static_cast<uint16_t>(v); }

Result<cxi_svc_desc> to_cxi(const ServiceDesc& d, const std::string& nic) {
  if (d.vnis.size() > CXI_SVC_MAX_VNIS)
    return invalid(nic + ": a CXI service allows at most " + std::to_string(CXI_SVC_MAX_VNIS) + " VNIs");
  if (d.member_uids.size() > CXI_SVC_MAX_MEMBERS)
    return invalid(nic + ": a CXI service allows at most " + std::to_string(CXI_SVC_MAX_MEMBERS) + " members");
  cxi_svc_desc out;
  std::memset(&out, 0, sizeof out);
  out.enable = 1;
  out.is_system_svc = d.system ? 1 : 0;
  out.restricted_members = d.member_uids.empty() ? 0 : 1;
  for (size_t i = 0; i < d.member_uids.size(); ++i) {
    out.members[i].type = CXI_SVC_MEMBER_UID;
    out.members[i].svc_member.uid = d.member_uids[i];
  }
  out.restricted_vnis = d.vnis.empty() ? 0 : 1;
  out.num_vld_vnis = static_cast<uint8_t>(d.vnis.size());
  for (size_t i = 0; i < d.vnis.size(); ++i) out.vnis[i] = d.vnis[i];
  out.restricted_tcs = d.tcs == 0 ? 0 : 1;
  for (const auto& t : kTcs) out.tcs[t.index] = (d.tcs & t.bit) != 0;
  out.resource_limits = d.limited ? 1 : 0;
  if (d.limited)
    for (size_t i = 0; i < kNumRsrc; ++i) {
      out.limits.type[i].res = clamp16(d.limits[i].reserved);
      out.limits.type[i].max = clamp16(d.limits[i].max);
    }
  return out;
}

// rsrc_name() lives in corral's library, which the module is not linked with.
const char* rsrc_name_local(size_t i) {
  static constexpr const char* kNames[kNumRsrc] = {"ptes", "txqs", "tgqs", "eqs", "cts", "les", "tles", "acs"};
  return i < kNumRsrc ? kNames[i] : "unknown";
}

// What the driver said was short, for the error message.
std::string shortfall(const cxi_svc_desc& asked, const cxi_svc_fail_info& fail) {
  std::string out;
  for (size_t i = 0; i < kNumRsrc; ++i)
    if (asked.resource_limits && asked.limits.type[i].res > fail.rsrc_avail[i])
      out += std::string(out.empty() ? " (" : ", ") + rsrc_name_local(i) + " " +
             std::to_string(asked.limits.type[i].res) + " asked, " + std::to_string(fail.rsrc_avail[i]) + " available";
  if (fail.no_le_pools) out += std::string(out.empty() ? " (" : ", ") + "no LE pool left";
  if (fail.no_tle_pools) out += std::string(out.empty() ? " (" : ", ") + "no TLE pool left";
  return out.empty() ? out : out + ")";
}

class LibcxiDevice final : public CxiDevice {
 public:
  static Result<std::unique_ptr<LibcxiDevice>> open() {
    auto api = load_api();
    if (!api) return api.error();
    auto dev = std::make_unique<LibcxiDevice>(*api);
    if (auto st = dev->open_all(); !st) return st.error();
    return dev;
  }

  explicit LibcxiDevice(std::shared_ptr<Api> api) : api_(std::move(api)) {}
  ~LibcxiDevice() override {
    for (auto& n : nics_)
      if (n.dev) api_->close_device(n.dev);
  }
  LibcxiDevice(const LibcxiDevice&) = delete;
  LibcxiDevice& operator=(const LibcxiDevice&) = delete;

  Result<std::vector<Nic>> list() override {
    std::vector<Nic> out;
    for (const auto& n : nics_) {
      cxil_svc_list* svcs = nullptr;
      if (int rc = api_->get_svc_list(n.dev, &svcs); rc != 0) return errno_error(rc, n.name + ": listing services");
      Nic nic{n.name, n.capacity, {}};
      for (unsigned i = 0; i < svcs->count; ++i)
        nic.services.push_back(Service{svcs->descs[i].svc_id, from_cxi(svcs->descs[i])});
      api_->free_svc_list(svcs);
      out.push_back(std::move(nic));
    }
    return out;
  }

  Result<uint32_t> alloc_service(const std::string& nic, const ServiceDesc& desc) override {
    auto n = find(nic);
    if (!n) return n.error();
    auto d = to_cxi(desc, nic);
    if (!d) return d.error();
    cxi_svc_fail_info fail;
    std::memset(&fail, 0, sizeof fail);
    const int rc = api_->alloc_svc((*n)->dev, &*d, &fail);
    if (rc > 0) return static_cast<uint32_t>(rc);
    Error e = errno_error(rc == 0 ? -EIO : rc, nic + ": cannot allocate a CXI service");
    if (rc == -ENOSPC) e.message += shortfall(*d, fail);
    return e;
  }

  Status destroy_service(const std::string& nic, uint32_t svc_id) override {
    auto n = find(nic);
    if (!n) return n.error();
    const int rc = api_->destroy_svc((*n)->dev, svc_id);
    if (rc == 0) return {};
    if (rc == -EBUSY) return Error{Errc::unavailable, nic + ": service " + std::to_string(svc_id) + " is busy"};
    return errno_error(rc, nic + ": cannot destroy service " + std::to_string(svc_id));
  }

 private:
  Status open_all() {
    cxil_device_list* list = nullptr;
    if (int rc = api_->get_device_list(&list); rc != 0) return errno_error(rc, "listing CXI devices");
    Status st;
    for (unsigned i = 0; i < list->count && st.ok(); ++i) {
      const cxil_devinfo& info = list->info[i];
      OpenNic n;
      n.name = info.device_name;
      n.capacity[static_cast<size_t>(Rsrc::PTE)].max = info.num_ptes;
      n.capacity[static_cast<size_t>(Rsrc::TXQ)].max = info.num_txqs;
      n.capacity[static_cast<size_t>(Rsrc::TGQ)].max = info.num_tgqs;
      n.capacity[static_cast<size_t>(Rsrc::EQ)].max = info.num_eqs;
      n.capacity[static_cast<size_t>(Rsrc::CT)].max = info.num_cts;
      n.capacity[static_cast<size_t>(Rsrc::LE)].max = info.num_les;
      n.capacity[static_cast<size_t>(Rsrc::TLE)].max = info.num_tles;
      n.capacity[static_cast<size_t>(Rsrc::AC)].max = info.num_acs;
      if (int rc = api_->open_device(info.dev_id, &n.dev); rc != 0)
        st = errno_error(rc, "opening " + n.name);
      else
        nics_.push_back(std::move(n));
    }
    api_->free_device_list(list);
    return st;
  }

  Result<const OpenNic*> find(const std::string& nic) const {
    for (const auto& n : nics_)
      if (n.name == nic) return &n;
    return not_found("NIC " + nic + " is not present on this node");
  }

  std::shared_ptr<Api> api_;  // outlives every opened device (destroyed last)
  std::vector<OpenNic> nics_;
};

}  // namespace

}  // namespace corral::fabric::slingshot

// The factory open_cxi_device dlsyms (kLibcxiFactorySymbol); the caller owns the result.
extern "C" __attribute__((visibility("default"))) corral::fabric::slingshot::CxiDevice* corral_cxi_libcxi_open(
    char* err, size_t err_len) noexcept {
  try {
    auto dev = corral::fabric::slingshot::LibcxiDevice::open();
    if (dev) return dev->release();
    if (err && err_len) std::snprintf(err, err_len, "%s", dev.message().c_str());
  } catch (const std::exception& e) {
    if (err && err_len) std::snprintf(err, err_len, "%s", e.what());
  }
  return nullptr;
}
