// A Kubernetes REST client on libcurl: JSON requests (get, list, create, merge-patch,
// delete) and watch streams, with the bearer token and CA of a KubeConfig. One client is
// one connection used by one thread at a time; interrupt() may be called from any thread
// to end a stream at once.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <curl/curl.h>
#include <nlohmann/json.hpp>

#include "storage/dws/fast_json.h"
#include "storage/dws/kube_config.h"
#include "util/result.h"

namespace corral::storage::dws {

struct KubeReply {
  long http = 0;        // the HTTP status
  // The parsed body (null when it was not JSON, and for a write the server accepted).
  nlohmann::json body;
  bool ok() const { return http >= 200 && http < 300; }
};

// One request: `path` starts with "/apis/..." (query included); a body goes with POST,
// PATCH and PUT.
struct KubeRequest {
  std::string method = "GET";
  std::string path;
  std::string body;
  std::string content_type = "application/json";
};

// A query parameter's value, percent-encoded (a label selector holds '=' and '/').
std::string query_escape(std::string_view value);

// A reply that is not 2xx as an Error: the API server's Status message, and what was asked.
Error reply_error(const KubeReply& r, std::string_view what);

class KubeClient {
 public:
  // `timeout`: seconds a request may take (streams have none).
  explicit KubeClient(std::shared_ptr<const KubeConfig> cfg, double timeout = 30);
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  // Blocking. Transport failures are errors (Errc::unavailable); every HTTP answer is a
  // reply. (Writes go through kube_writers.h, which drives begin()/finish() itself.)
  Result<KubeReply> request(const KubeRequest& req);
  Result<KubeReply> get(const std::string& path) { return request(KubeRequest{"GET", path, {}, {}}); }

  // For a caller that drives its transfers itself (curl's multi interface, kube_writers.h):
  // prepares this client's handle for `req`, which must outlive the transfer, and returns
  // it; once curl reports the transfer done with `rc`, finish() gives the reply.
  CURL* begin(const KubeRequest& req);
  Result<KubeReply> finish(const KubeRequest& req, CURLcode rc);

  // Reads a watch stream until the server closes it, `on_events` returns false or
  // interrupt(); the answer is the HTTP status (200, or the refusal: 410 when the version
  // is too old). The connection failing is an error. Each call of `on_events` gets the
  // events that arrived together, parsed, less the `omit` fields of each event's object
  // (paths from the object: {"status", "drivers"}).
  Result<long> stream(const std::string& path, const std::function<bool(std::vector<nlohmann::json>&)>& on_events,
                      const std::vector<JsonPath>& omit = {});
  // Ends the current and every later stream of this client (thread-safe).
  void interrupt();

 private:
  struct Curl;
  std::shared_ptr<const KubeConfig> cfg_;
  double timeout_;
  std::unique_ptr<Curl> curl_;
  std::string text_;  // the reply being read
  std::atomic<bool> interrupted_{false};
};

}  // namespace corral::storage::dws
