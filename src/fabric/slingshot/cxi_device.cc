// Backend selection for the CXI device interface, and the small shared helpers.
#include "fabric/slingshot/cxi_device.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <set>
#include <utility>

#include "fabric/slingshot/sim_cxi.h"

namespace corral::fabric::slingshot {

const char* rsrc_name(Rsrc r) {
  static constexpr std::array<const char*, kNumRsrc> kNames = {"ptes", "txqs", "tgqs", "eqs",
                                                               "cts",  "les",  "tles", "acs"};
  const auto i = static_cast<size_t>(r);
  return i < kNames.size() ? kNames[i] : "unknown";
}

namespace {

struct TcName {
  uint32_t bit;
  const char* name;
};
constexpr TcName kTcNames[] = {{kTcDedicatedAccess, "DEDICATED_ACCESS"},
                               {kTcLowLatency, "LOW_LATENCY"},
                               {kTcBulkData, "BULK_DATA"},
                               {kTcBestEffort, "BEST_EFFORT"}};

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const char* tc_name(uint32_t tc_bit) {
  for (const auto& t : kTcNames)
    if (t.bit == tc_bit) return t.name;
  return "UNKNOWN";
}

Result<uint32_t> parse_tc(std::string_view name) {
  std::string u = upper(name);
  if (u.rfind("TC_", 0) == 0) u.erase(0, 3);
  for (const auto& t : kTcNames)
    if (u == t.name) return t.bit;
  return invalid("unknown traffic class '" + std::string(name) +
                 "' (BEST_EFFORT, LOW_LATENCY, BULK_DATA or DEDICATED_ACCESS)");
}

bool same_vni_set(const ServiceDesc& desc, const std::vector<uint16_t>& vnis) {
  return std::set<uint16_t>(desc.vnis.begin(), desc.vnis.end()) == std::set<uint16_t>(vnis.begin(), vnis.end());
}

namespace {

// A node without Slingshot NICs.
class NoCxiDevice final : public CxiDevice {
 public:
  Result<std::vector<Nic>> list() override { return std::vector<Nic>{}; }
  Result<uint32_t> alloc_service(const std::string& nic, const ServiceDesc&) override {
    return not_found("NIC " + nic + " does not exist: this node has no Slingshot NICs (--cxi none)");
  }
  Status destroy_service(const std::string& nic, uint32_t) override {
    return not_found("NIC " + nic + " does not exist: this node has no Slingshot NICs (--cxi none)");
  }
};

// Closes the module when the device it made is gone.
struct DlCloser {
  void operator()(void* h) const {
    if (h) ::dlclose(h);
  }
};
using ModuleHandle = std::unique_ptr<void, DlCloser>;

// A device from the libcxi module; keeps the module loaded while the device lives.
class ModuleDevice final : public CxiDevice {
 public:
  ModuleDevice(ModuleHandle module, std::unique_ptr<CxiDevice> dev)
      : module_(std::move(module)), dev_(std::move(dev)) {}
  Result<std::vector<Nic>> list() override { return dev_->list(); }
  Result<uint32_t> alloc_service(const std::string& nic, const ServiceDesc& desc) override {
    return dev_->alloc_service(nic, desc);
  }
  Status destroy_service(const std::string& nic, uint32_t id) override { return dev_->destroy_service(nic, id); }

 private:
  ModuleHandle module_;  // declared first: destroyed after dev_
  std::unique_ptr<CxiDevice> dev_;
};

constexpr const char* kModuleName = "corral-cxi-libcxi.so";

// <dir of the executable>/../lib/corral/ first (an installed or build tree), then the
// default library search path.
ModuleHandle load_module(std::string& err) {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto beside = exe.parent_path().parent_path() / "lib" / "corral" / kModuleName;
    if (std::filesystem::exists(beside, ec))
      if (void* h = ::dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL)) return ModuleHandle(h);
  }
  void* h = ::dlopen(kModuleName, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    err = e ? e : "cannot load " + std::string(kModuleName);
  }
  return ModuleHandle(h);
}

Result<std::unique_ptr<CxiDevice>> open_libcxi() {
  const std::string hint = "; build corral where libcxi's headers are installed, or use --cxi sim:DIR";
  std::string err;
  ModuleHandle module = load_module(err);
  if (!module) return Error{Errc::unavailable, "libcxi backend: " + err + hint};
  ::dlerror();
  void* sym = ::dlsym(module.get(), kLibcxiFactorySymbol);
  if (!sym) {
    const char* e = ::dlerror();
    return Error{Errc::unavailable, "libcxi backend: " + std::string(e ? e : "no factory symbol") + hint};
  }
  auto factory = reinterpret_cast<LibcxiFactory>(sym);
  std::array<char, 512> msg{};
  std::unique_ptr<CxiDevice> dev(factory(msg.data(), msg.size()));
  if (!dev) return Error{Errc::unavailable, "libcxi backend: " + std::string(msg.data())};
  return std::unique_ptr<CxiDevice>(std::make_unique<ModuleDevice>(std::move(module), std::move(dev)));
}

Result<std::unique_ptr<CxiDevice>> open_sim(std::string_view rest, const std::string& node) {
  const auto colon = rest.find(':');
  std::string dir(rest.substr(0, colon));
  std::string config = colon == std::string_view::npos ? "" : std::string(rest.substr(colon + 1));
  if (dir.empty()) return invalid("CXI spec 'sim:" + std::string(rest) + "': the state directory is empty");
  SimConfig cfg = default_sim_config();
  if (!config.empty()) {
    auto loaded = load_sim_config(config);
    if (!loaded) return loaded.error();
    cfg = std::move(*loaded);
  }
  auto dev = SimCxiDevice::create(dir, node, std::move(cfg));
  if (!dev) return dev.error();
  return std::unique_ptr<CxiDevice>(std::move(*dev));
}

}  // namespace

Result<std::unique_ptr<CxiDevice>> open_cxi_device(const std::string& spec, const std::string& node) {
  if (spec == "none") return std::unique_ptr<CxiDevice>(std::make_unique<NoCxiDevice>());
  if (spec == "libcxi") return open_libcxi();
  if (spec.rfind("sim:", 0) == 0) return open_sim(std::string_view(spec).substr(4), node);
  return invalid("unknown CXI backend spec '" + spec + "' (expected sim:STATE_DIR[:CONFIG.toml], libcxi or none)");
}

}  // namespace corral::fabric::slingshot
