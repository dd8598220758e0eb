#include "storage/dws/kube_client.h"

#include <curl/curl.h>

#include <map>

#include <fmt/format.h>

#include "http/http_client.h"

namespace corral::storage::dws {
namespace {

using nlohmann::json;

// A watch line longer than this is refused (an object is at most the API server's 3 MiB).
constexpr size_t kMaxLine = 4 << 20;
constexpr size_t kMaxBody = 64 << 20;

size_t append_body(char* data, size_t size, size_t n, void* user) {
  auto* out = static_cast<std::string*>(user);
  if (out->size() + size * n > kMaxBody) return 0;
  out->append(data, size * n);
  return size * n;
}

}  // namespace

std::string query_escape(std::string_view value) {
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

Error reply_error(const KubeReply& r, std::string_view what) {
  std::string msg;
  if (r.body.is_object()) msg = r.body.value("message", "");
  if (msg.empty()) msg = fmt::format("HTTP {}", r.http);
  return Error{http::errc_of_http(r.http), fmt::format("kubernetes: {}: {} (HTTP {})", what, msg, r.http)};
}

struct KubeClient::Curl {
  FastJson json;
  CURL* easy = nullptr;
  CURLM* multi = nullptr;
  curl_slist* headers = nullptr;  // Accept and the token: GETs and watches
  // The same with each Content-Type a write sends, built once: a request copies nothing.
  std::map<std::string, curl_slist*, std::less<>> with_type;
  ~Curl() {
    if (multi) curl_multi_cleanup(multi);
    if (easy) curl_easy_cleanup(easy);
    if (headers) curl_slist_free_all(headers);
    for (auto& [type, list] : with_type) curl_slist_free_all(list);
  }
  curl_slist* headers_for(std::string_view content_type) {
    auto it = with_type.find(content_type);
    if (it != with_type.end()) return it->second;
    curl_slist* list = nullptr;
    for (auto* h = headers; h; h = h->next) list = curl_slist_append(list, h->data);
    list = curl_slist_append(list, fmt::format("Content-Type: {}", content_type).c_str());
    return with_type.emplace(std::string(content_type), list).first->second;
  }
};

namespace {

// The options every request shares, set once for the handle's life: TLS trust, no signals,
// keep-alive. (A curl_easy_reset per request, then setting them again, was a measurable
// part of each DWS write: the CA blob is copied each time it is set.)
void common_options(CURL* c, const KubeConfig& kc) {
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  if (!kc.ca_pem.empty()) {
    curl_blob blob{const_cast<char*>(kc.ca_pem.data()), kc.ca_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
  }
  if (kc.insecure) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
}

}  // namespace

KubeClient::KubeClient(std::shared_ptr<const KubeConfig> cfg, double timeout)
    : cfg_(std::move(cfg)), timeout_(timeout), curl_(std::make_unique<Curl>()) {
  curl_->easy = curl_easy_init();
  curl_->multi = curl_multi_init();
  curl_->headers = curl_slist_append(nullptr, "Accept: application/json");
  if (!cfg_->token.empty())
    curl_->headers = curl_slist_append(curl_->headers, ("Authorization: Bearer " + cfg_->token).c_str());
  common_options(curl_->easy, *cfg_);
}

KubeClient::~KubeClient() = default;

void KubeClient::interrupt() {
  interrupted_ = true;
  if (curl_->multi) curl_multi_wakeup(curl_->multi);
}

Result<KubeReply> KubeClient::request(const KubeRequest& req) {
  CURL* c = begin(req);
  return finish(req, curl_easy_perform(c));
}

// Every option one request sets is set by each request (the handle keeps the last one's).
CURL* KubeClient::begin(const KubeRequest& req) {
  CURL* c = curl_->easy;
  const std::string url = cfg_->server + req.path;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());  // copied by curl
  const std::string& m = req.method;
  if (!req.body.empty() || m == "POST" || m == "PATCH" || m == "PUT") {
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, curl_->headers_for(req.content_type));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(req.body.size()));
  } else {
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, curl_->headers);
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  }
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, m == "GET" ? nullptr : m.c_str());
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_ * 1000));
  text_.clear();
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &text_);
  return c;
}

Result<KubeReply> KubeClient::finish(const KubeRequest& req, CURLcode rc) {
  CURL* c = curl_->easy;
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, nullptr);  // it points into `req`
  if (rc != CURLE_OK)
    return Error{Errc::unavailable,
                 fmt::format("kubernetes: {} {}{}: {}", req.method, cfg_->server, req.path, curl_easy_strerror(rc))};
  KubeReply r;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.http);
  // A write's success answers with the whole object, which no caller reads: parsing it was
  // a fifth of each DWS write's CPU. Reads, and every refusal (for its message), are parsed.
  if (req.method == "GET" || !r.ok()) {
    r.body = curl_->json.parse(text_);
    if (r.body.is_discarded()) r.body = nullptr;
  }
  if (text_.capacity() > (1u << 20)) std::string().swap(text_);  // a large list's text is not kept
  return r;
}

namespace {

struct StreamState {
  std::string buf;
  FastJson* parser;
  std::vector<JsonPath> omit;  // from the event's root
  const std::function<bool(std::vector<json>&)>* on_events;
  bool stopped = false;
  bool too_long = false;
};

size_t stream_write(char* data, size_t size, size_t n, void* user) {
  auto* st = static_cast<StreamState*>(user);
  st->buf.append(data, size * n);
  std::vector<json> events;
  size_t start = 0;
  for (size_t nl; (nl = st->buf.find('\n', start)) != std::string::npos; start = nl + 1) {
    if (nl == start) continue;
    json ev = st->parser->parse(std::string_view(st->buf).substr(start, nl - start), st->omit);
    if (ev.is_object()) events.push_back(std::move(ev));
  }
  st->buf.erase(0, start);
  if (st->buf.size() > kMaxLine) {
    st->too_long = true;
    return 0;
  }
  if (!events.empty() && !(*st->on_events)(events)) {
    st->stopped = true;
    return 0;
  }
  return size * n;
}

}  // namespace

Result<long> KubeClient::stream(const std::string& path, const std::function<bool(std::vector<json>&)>& on_events,
                                const std::vector<JsonPath>& omit) {
  if (interrupted_) return 200L;
  CURL* c = curl_->easy;
  const std::string url = cfg_->server + path;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, curl_->headers);
  curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, nullptr);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 0L);
  StreamState st;
  st.parser = &curl_->json;
  for (const auto& p : omit) {
    JsonPath from_root{"object"};
    from_root.insert(from_root.end(), p.begin(), p.end());
    st.omit.push_back(std::move(from_root));
  }
  st.on_events = &on_events;
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, stream_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &st);
  curl_multi_add_handle(curl_->multi, c);
  int running = 1;
  CURLMcode mc = CURLM_OK;
  while (running && !interrupted_) {
    mc = curl_multi_perform(curl_->multi, &running);
    if (mc != CURLM_OK || !running) break;
    mc = curl_multi_poll(curl_->multi, nullptr, 0, 1000, nullptr);
    if (mc != CURLM_OK) break;
  }
  CURLcode rc = CURLE_OK;
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(curl_->multi, &left))
    if (msg->msg == CURLMSG_DONE) rc = msg->data.result;
  long http = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
  curl_multi_remove_handle(curl_->multi, c);
  if (interrupted_ || st.stopped) return 200L;
  if (mc != CURLM_OK) return Error{Errc::unavailable, fmt::format("kubernetes: watch: {}", curl_multi_strerror(mc))};
  if (st.too_long) return Error{Errc::invalid_argument, "kubernetes: watch: an event line is too long"};
  if (rc != CURLE_OK)
    return Error{Errc::unavailable, fmt::format("kubernetes: watch {}: {}", path, curl_easy_strerror(rc))};
  return http;
}

}  // namespace corral::storage::dws
