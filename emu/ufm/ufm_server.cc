#include "ufm_server.h"

#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "fabric/infiniband/ib_config.h"
#include "fabric/infiniband/ib_sysfs.h"

namespace corral::emu::ufm {

using nlohmann::json;
namespace fs = std::filesystem;
namespace ib = corral::fabric::infiniband;

namespace {

constexpr size_t kMaxBody = 4 << 20;
constexpr size_t kMaxLog = 10000;
constexpr size_t kMaxFaults = 100;

void reply(httplib::Response& res, const Reply& r) {
  res.status = r.status;
  res.set_content(r.body.dump(), "application/json");
}

// The request's JSON; null when it has none or is not JSON.
json body_of(const httplib::Request& req) {
  json j = json::parse(req.body, nullptr, false, true);
  return j.is_discarded() ? json() : j;
}

std::string read_line(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

// The nodes of the test cluster's trees: DIR/NODE when DIR has such trees, else DIR.
std::vector<std::pair<std::string, fs::path>> node_trees(const std::string& root) {
  std::vector<std::pair<std::string, fs::path>> out;
  std::error_code ec;
  if (root.empty()) return out;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (fs::is_directory(e.path() / "class" / "infiniband", ec)) out.emplace_back(e.path().filename(), e.path());
  if (out.empty() && fs::is_directory(fs::path(root) / "class" / "infiniband", ec)) out.emplace_back("node", root);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

UfmServer::UfmServer(UfmConfig cfg) : cfg_(std::move(cfg)), http_(std::make_unique<httplib::Server>()) {
  http_->set_payload_max_length(kMaxBody);
  routes();
}

UfmServer::~UfmServer() { stop(); }

int UfmServer::bind(const std::string& host, int port) {
  return port == 0 ? http_->bind_to_any_port(host) : (http_->bind_to_port(host, port) ? port : -1);
}

void UfmServer::serve() { http_->listen_after_bind(); }

void UfmServer::stop() {
  if (http_) http_->stop();
}

bool UfmServer::authorized(const httplib::Request& req, httplib::Response& res) const {
  if (cfg_.password.empty()) return true;
  const auto want = httplib::make_basic_authentication_header(cfg_.user, cfg_.password, false).second;
  if (req.get_header_value("Authorization") == want) return true;
  res.status = 401;
  res.set_header("WWW-Authenticate", "Basic realm=\"UFM\"");
  res.set_content(json{{"error", "authentication required"}}.dump(), "application/json");
  return false;
}

bool UfmServer::fault(const httplib::Request& req, httplib::Response& res) {
  Fault hit;
  {
    std::lock_guard lock(mu_);
    auto it = std::find_if(faults_.begin(), faults_.end(), [&](const Fault& f) {
      return f.times != 0 && (f.method == "*" || f.method == req.method) && req.path.starts_with(f.path);
    });
    if (it == faults_.end()) return false;
    if (it->times > 0) --it->times;
    hit = *it;
  }
  if (hit.delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(hit.delay));
  if (hit.status == 0) return false;  // a delay only
  reply(res, Reply{hit.status, json{{"error", hit.message}}});
  return true;
}

void UfmServer::log(const httplib::Request& req, const httplib::Response& res) {
  std::lock_guard lock(mu_);
  log_.push_back({{"method", req.method}, {"path", req.path}, {"status", res.status}, {"body", body_of(req)}});
  if (log_.size() > kMaxLog) log_.pop_front();
}

json UfmServer::ports() const {
  json out = json::array();
  auto fabrics = ib::Fabrics::create({});
  for (const auto& [node, root] : node_trees(cfg_.sysfs)) {
    auto found = ib::discover(ib::DiscoveryOptions{root.string(), cfg_.pci_ids}, *fabrics);
    if (!found) continue;
    for (const auto& d : found->devices) {
      for (const auto& p : d.ports) {
        const std::string guid = ib::plain_guid(d.node_guid);
        json port{{"guid", guid},
                  {"name", fmt::format("{}_{}", guid, p.num)},
                  {"system_name", node},
                  {"dname", fmt::format("{}/{}", d.name, p.num)},
                  {"number", p.num},
                  {"lid", p.lid},
                  {"logical_state", p.active() ? "Active" : "Down"},
                  {"physical_state", p.phys_state},
                  {"active_speed", p.rate}};
        std::lock_guard lock(mu_);
        if (auto s = port_state_.find(guid); s != port_state_.end()) port["logical_state"] = s->second;
        out.push_back(std::move(port));
      }
      // Virtual functions the prolog named (sriov/N/port): virtual ports of the PF.
      std::error_code ec;
      const fs::path sriov = root / "class" / "infiniband" / d.name / "device" / "sriov";
      for (const auto& vf : fs::directory_iterator(sriov, ec)) {
        const std::string guid = ib::plain_guid(read_line(vf.path() / "port"));
        if (guid.empty() || guid.find_first_not_of('0') == std::string::npos) continue;
        out.push_back({{"guid", guid},
                       {"name", fmt::format("{}_vf{}", guid, vf.path().filename().string())},
                       {"system_name", node},
                       {"dname", fmt::format("{}/vf{}", d.name, vf.path().filename().string())},
                       {"virtual", true},
                       {"logical_state", "Active"}});
      }
    }
  }
  return out;
}

json UfmServer::set_faults(const json& body) {
  if (!body.is_object() || !body.value("faults", json()).is_array() || body["faults"].size() > kMaxFaults)
    return json{{"error", "want {\"faults\": [...]} with at most 100 rules"}};
  std::vector<Fault> rules;
  for (const auto& f : body["faults"]) {
    if (!f.is_object()) return json{{"error", "each fault is an object"}};
    Fault r;
    r.method = f.value("method", r.method);
    r.path = f.value("path", r.path);
    r.status = f.value("status", r.status);
    r.message = f.value("message", r.message);
    r.delay = std::min(f.value("delay", 0.0), 600.0);
    r.times = f.value("times", -1);
    rules.push_back(std::move(r));
  }
  std::lock_guard lock(mu_);
  faults_ = std::move(rules);
  return json::object();
}

void UfmServer::routes() {
  auto guarded = [this](auto fn) {
    return [this, fn](const httplib::Request& req, httplib::Response& res) {
      if (authorized(req, res) && !fault(req, res)) fn(req, res);
      log(req, res);
    };
  };
  http_->Get("/ufmRest/app/ufm_version", guarded([](const httplib::Request&, httplib::Response& res) {
               reply(res, Reply{200, json{{"ufm_release_version", "6.19.0-emu"}}});
             }));
  http_->Get("/ufmRest/resources/pkeys", guarded([this](const httplib::Request& req, httplib::Response& res) {
               reply(res, pkeys_.get("", req.get_param_value("guids_data") == "true"));
             }));
  http_->Get(R"(/ufmRest/resources/pkeys/([^/]+))",
             guarded([this](const httplib::Request& req, httplib::Response& res) {
               reply(res, pkeys_.get(req.matches[1], req.get_param_value("guids_data") == "true"));
             }));
  http_->Post("/ufmRest/resources/pkeys/add", guarded([this](const httplib::Request& req, httplib::Response& res) {
                reply(res, pkeys_.create(body_of(req)));
              }));
  http_->Post("/ufmRest/resources/pkeys", guarded([this](const httplib::Request& req, httplib::Response& res) {
                reply(res, pkeys_.add_guids(body_of(req)));
              }));
  http_->Post("/ufmRest/actions/remove_guids_from_pkey",
              guarded([this](const httplib::Request& req, httplib::Response& res) {
                reply(res, pkeys_.remove_guids(body_of(req)));
              }));
  http_->Delete(R"(/ufmRest/resources/pkeys/([^/]+))",
                guarded([this](const httplib::Request& req, httplib::Response& res) {
                  reply(res, pkeys_.remove(req.matches[1]));
                }));
  http_->Get("/ufmRest/resources/ports", guarded([this](const httplib::Request&, httplib::Response& res) {
               reply(res, Reply{200, ports()});
             }));
  // The operator's side (no fault applies to it).
  http_->Post("/emu/v1/faults", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    json r = set_faults(body_of(req));
    reply(res, Reply{r.contains("error") ? 400 : 200, r});
  });
  http_->Post("/emu/v1/ports", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    json b = body_of(req);
    auto guid = parse_ufm_guid(b.is_object() ? b.value("guid", json()) : json());
    const std::string state = b.is_object() ? b.value("logical_state", std::string()) : "";
    if (!guid || state.empty()) return reply(res, Reply{400, json{{"error", "want {\"guid\", \"logical_state\"}"}}});
    std::lock_guard lock(mu_);
    port_state_[*guid] = state;
    reply(res, Reply{});
  });
  http_->Get("/emu/v1/requests", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    std::lock_guard lock(mu_);
    reply(res, Reply{200, json(log_)});
  });
}

}  // namespace corral::emu::ufm
