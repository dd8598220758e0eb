#include "http/http_client.h"

#include <curl/curl.h>

#include <fmt/format.h>

namespace corral::http {
namespace {

struct Sink {
  std::string* out;
  size_t max;
  bool too_long = false;
};

size_t append_body(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  if (sink->out->size() + size * n > sink->max) {
    sink->too_long = true;
    return 0;
  }
  sink->out->append(data, size * n);
  return size * n;
}

// The first line of an answer, at most 300 characters: enough to say what went wrong.
std::string first_line(std::string_view body) {
  body = body.substr(0, body.find('\n'));
  if (body.size() > 300) return std::string(body.substr(0, 300)) + "...";
  return std::string(body);
}

}  // namespace

Errc errc_of_http(long status) {
  switch (status) {
    case 400:
    case 422:
      return Errc::invalid_argument;
    case 401:
    case 403:
      return Errc::permission_denied;
    case 404:
      return Errc::not_found;
    case 409:
      return Errc::already_exists;
    case 429:
      return Errc::resource_exhausted;
    default:
      return status >= 500 ? Errc::unavailable : Errc::internal;
  }
}

Error reply_error(const HttpReply& r, std::string_view what) {
  std::string body = first_line(r.body);
  if (body.empty()) body = "no message";
  return Error{errc_of_http(r.status), fmt::format("{}: {} (HTTP {})", what, body, r.status)};
}

struct HttpClient::Curl {
  CURL* easy = nullptr;
  ~Curl() {
    if (easy) curl_easy_cleanup(easy);
  }
};

HttpClient::HttpClient(HttpOptions opts) : opts_(std::move(opts)), curl_(std::make_unique<Curl>()) {
  while (!opts_.base_url.empty() && opts_.base_url.back() == '/') opts_.base_url.pop_back();
  curl_->easy = curl_easy_init();
}

HttpClient::~HttpClient() = default;

Result<HttpReply> HttpClient::request(std::string_view method, const std::string& path, const std::string& body) {
  CURL* c = curl_->easy;
  if (!c) return Error{Errc::internal, "libcurl could not start"};
  const std::string m(method), url = opts_.base_url + path;
  curl_easy_reset(c);
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(opts_.timeout * 1000));
  if (!opts_.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, opts_.ca_file.c_str());
  if (!opts_.basic_auth.empty()) {
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(c, CURLOPT_USERPWD, opts_.basic_auth.c_str());
  }
  curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
  if (!body.empty()) headers = curl_slist_append(headers, "Content-Type: application/json");
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> guard(headers, curl_slist_free_all);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, m.c_str());
  if (!body.empty() || m == "POST" || m == "PUT" || m == "PATCH") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  HttpReply r;
  Sink sink{&r.body, opts_.max_body};
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  const CURLcode rc = curl_easy_perform(c);
  if (sink.too_long)
    return Error{Errc::resource_exhausted, fmt::format("{} {}: the answer is longer than {} bytes", m, url, sink.max)};
  if (rc != CURLE_OK) return Error{Errc::unavailable, fmt::format("{} {}: {}", m, url, curl_easy_strerror(rc))};
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  return r;
}

}  // namespace corral::http
