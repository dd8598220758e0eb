// A blocking HTTP client for REST services (libcurl): one connection, kept alive, used by
// one thread at a time. Transport failures are errors; every HTTP answer is a reply, and
// reply_error() turns one that is not 2xx into an error a user can act on.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "util/result.h"

namespace corral::http {

struct HttpOptions {
  std::string base_url{};      // "https://ufm.example.org" (no trailing slash needed)
  std::string basic_auth{};    // "user:password"; empty: none
  std::string ca_file{};       // PEM bundle to verify the server; empty: the system's
  double timeout = 30;         // seconds per request
  size_t max_body = 16 << 20;  // a longer answer is an error
};

struct HttpReply {
  long status = 0;
  std::string body;
  bool ok() const { return status >= 200 && status < 300; }
};

// The error class of an HTTP status (400 invalid, 401/403 denied, 404 not found, 5xx
// unavailable, ...).
Errc errc_of_http(long status);
// A reply that is not 2xx as an Error: "WHAT: BODY (HTTP 500)", the body cut to a line.
Error reply_error(const HttpReply& r, std::string_view what);

class HttpClient {
 public:
  explicit HttpClient(HttpOptions opts);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // `path` starts with '/' (query included); a non-empty body is sent as JSON.
  Result<HttpReply> request(std::string_view method, const std::string& path, const std::string& body = {});
  const HttpOptions& options() const { return opts_; }

 private:
  struct Curl;
  HttpOptions opts_;
  std::unique_ptr<Curl> curl_;
};

}  // namespace corral::http
