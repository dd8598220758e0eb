// The HTTP face of the emulator: the Kubernetes REST API for the DWS kinds (discovery,
// list/get/create/update/patch/delete, /status subresources, watch streams, tables for
// kubectl), bearer-token authentication, and the operator's /emu/v1 endpoints (faults,
// rabbit health, watch cuts, an API outage).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "crd_catalog.h"
#include "faults.h"
#include "nnf_driver.h"
#include "object_store.h"
#include "workflow_admission.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace corral::emu::dws {

struct ApiConfig {
  std::string token;  // required as "Authorization: Bearer <token>" when not empty
  double bookmark_interval = 5.0;
  int threads = 64;               // connections served at once (each open watch holds one)
  std::string tls_cert, tls_key;  // PEM files; both set: HTTPS (as every real API server)
};

class ApiServer {
 public:
  ApiServer(ObjectStore& store, const CrdCatalog& catalog, const WorkflowAdmission& admission, FaultTable& faults,
            NnfDriver& driver, ApiConfig cfg);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds host:port (port 0: any); returns the port, or -1.
  int bind(const std::string& host, int port);
  // Serves until stop().
  void serve();
  void stop();

 private:
  void routes();
  bool authorized(const httplib::Request& req, httplib::Response& res) const;
  void resource(const httplib::Request& req, httplib::Response& res);
  void list_or_watch(const KindInfo& k, const std::string& ns, const httplib::Request& req, httplib::Response& res);
  void watch(const KindInfo& k, const std::string& ns, const httplib::Request& req, httplib::Response& res);
  void create(const KindInfo& k, const std::string& ns, const httplib::Request& req, httplib::Response& res);
  void write(const KindInfo& k, const std::string& ns, const std::string& name, bool status,
             const httplib::Request& req, httplib::Response& res);
  void remove(const KindInfo& k, const std::string& ns, const std::string& name, httplib::Response& res);
  void admin(const httplib::Request& req, httplib::Response& res);
  nlohmann::json openapi_v3() const;

  ObjectStore& store_;
  const CrdCatalog& catalog_;
  const WorkflowAdmission& admission_;
  FaultTable& faults_;
  NnfDriver& driver_;
  ApiConfig cfg_;
  std::unique_ptr<httplib::Server> server_;
  std::atomic<int64_t> down_until_ms_{0};
};

}  // namespace corral::emu::dws
