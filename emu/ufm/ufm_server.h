// The HTTP face of the UFM emulator: the parts of UFM's REST interface corral uses
// (/ufmRest/app/ufm_version, /ufmRest/resources/pkeys..., /ufmRest/actions/
// remove_guids_from_pkey, /ufmRest/resources/ports) behind Basic authentication, and the
// operator's /emu/v1 endpoints: faults (an answer and a delay for matching requests),
// port states, and the log of requests served.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pkey_table.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace corral::emu::ufm {

struct UfmConfig {
  std::string user = "admin", password;  // Basic authentication; no password: none asked
  std::string sysfs;                     // the test cluster's trees (DIR/NODE, or DIR for one node)
  std::string pci_ids;                   // for device names in the port list
};

struct Fault {
  std::string method = "*";  // "POST", or "*"
  std::string path;          // a prefix of the request path ("" matches all)
  int status = 500;
  std::string message = "emulated failure";
  double delay = 0;  // seconds before answering
  int times = -1;    // requests it may still hit (-1: no limit)
};

class UfmServer {
 public:
  explicit UfmServer(UfmConfig cfg);
  ~UfmServer();
  UfmServer(const UfmServer&) = delete;
  UfmServer& operator=(const UfmServer&) = delete;

  int bind(const std::string& host, int port);  // the port, or -1
  void serve();
  void stop();

 private:
  void routes();
  bool authorized(const httplib::Request& req, httplib::Response& res) const;
  // A matching fault's answer (after its delay); false when none matched.
  bool fault(const httplib::Request& req, httplib::Response& res);
  void log(const httplib::Request& req, const httplib::Response& res);
  nlohmann::json ports() const;
  nlohmann::json set_faults(const nlohmann::json& body);

  UfmConfig cfg_;
  std::unique_ptr<httplib::Server> http_;
  PkeyTable pkeys_;
  mutable std::mutex mu_;
  std::vector<Fault> faults_;
  std::map<std::string, std::string> port_state_;  // GUID -> "Down", set by the operator
  std::deque<nlohmann::json> log_;
};

}  // namespace corral::emu::ufm
