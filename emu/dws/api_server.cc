#include "api_server.h"

#include <httplib.h>

#include <algorithm>
#include <random>
#include <regex>

#include <fmt/format.h>

#include "storage/dws/yaml_json.h"

namespace corral::emu::dws {

using nlohmann::json;

namespace {

constexpr size_t kMaxBody = 3 << 20;  // the API server's request size limit
constexpr size_t kMaxDepth = 100;     // what a decoder must get through without a deep stack

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void reply(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

void fail(httplib::Response& res, const ApiError& e) { reply(res, e.code, status_body(e)); }

void reply_text(httplib::Response& res, int code, const std::string& text) {
  res.status = code;
  res.set_content(text, "application/json");
}

bool wants_table(const httplib::Request& req) {
  return req.get_header_value("Accept").find("as=Table") != std::string::npos;
}

// k8s.io/apimachinery HumanDuration, as table "date" columns show ages.
std::string human_age(const std::string& stamp) {
  std::tm tm{};
  if (!strptime(stamp.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return "<unknown>";
  long s = static_cast<long>(std::time(nullptr) - timegm(&tm));
  if (s < 0) s = 0;
  if (s < 120) return fmt::format("{}s", s);
  long m = s / 60, h = m / 60, d = h / 24;
  if (m < 10) return s % 60 ? fmt::format("{}m{}s", m, s % 60) : fmt::format("{}m", m);
  if (m < 180) return fmt::format("{}m", m);
  if (h < 8) return m % 60 ? fmt::format("{}h{}m", h, m % 60) : fmt::format("{}h", h);
  if (h < 48) return fmt::format("{}h", h);
  if (h < 192) return h % 24 ? fmt::format("{}d{}h", d, h % 24) : fmt::format("{}d", d);
  return d < 365 * 2 ? fmt::format("{}d", d) : fmt::format("{}y{}d", d / 365, d % 365);
}

json json_path(const json& obj, const std::string& path) {
  const json* cur = &obj;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] != '.') return nullptr;
    size_t j = path.find('.', i + 1);
    std::string key = path.substr(i + 1, j == std::string::npos ? std::string::npos : j - i - 1);
    if (!cur->is_object() || !cur->contains(key)) return nullptr;
    cur = &(*cur)[key];
    i = j == std::string::npos ? path.size() : j;
  }
  return *cur;
}

json table_columns(const KindInfo& k) {
  json cols = json::array({{{"name", "Name"},
                            {"type", "string"},
                            {"format", "name"},
                            {"description", "Name must be unique within a namespace."},
                            {"priority", 0}}});
  for (const auto& c : k.columns)
    cols.push_back({{"name", c.name},
                    {"type", c.type == "date" ? "string" : c.type},
                    {"format", ""},
                    {"description", c.description},
                    {"priority", c.priority}});
  return cols;
}

json table_row(const KindInfo& k, const json& obj) {
  json cells = json::array({obj["metadata"].value("name", "")});
  for (const auto& c : k.columns) {
    json v = json_path(obj, c.json_path);
    if (c.type == "date" && v.is_string()) v = human_age(v.get<std::string>());
    cells.push_back(v);
  }
  return {
      {"cells", cells},
      {"object", {{"kind", "PartialObjectMetadata"}, {"apiVersion", "meta.k8s.io/v1"}, {"metadata", obj["metadata"]}}}};
}

json table(const KindInfo& k, const std::vector<ObjectPtr>& items, uint64_t rv) {
  json rows = json::array();
  for (const auto& o : items) rows.push_back(table_row(k, *o));
  return {{"kind", "Table"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", {{"resourceVersion", std::to_string(rv)}}},
          {"columnDefinitions", table_columns(k)},
          {"rows", rows}};
}

// fieldValidation=Strict (what kubectl asks for): an unknown field is an error, not dropped.
std::optional<ApiError> strict_fields(const httplib::Request& req, const KindInfo& k,
                                      const std::vector<std::string>& pruned) {
  if (pruned.empty() || req.get_param_value("fieldValidation") != "Strict") return std::nullopt;
  std::string list;
  for (const auto& p : pruned) list += (list.empty() ? "" : ", ") + fmt::format("unknown field \"{}\"", p);
  return bad_request(fmt::format("{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}", k.kind,
                                 k.version, k.kind, list));
}

bool valid_name(const std::string& n) {
  static const std::regex re("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");
  return !n.empty() && n.size() <= 253 && std::regex_match(n, re);
}

// Deepest bracket nesting outside strings: bounded before a recursive parser sees it.
size_t nesting(const std::string& s) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::optional<json> parse_body(const httplib::Request& req, httplib::Response& res) {
  if (req.body.size() > kMaxBody) {
    fail(res, ApiError{413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728", {}});
    return std::nullopt;
  }
  if (nesting(req.body) > kMaxDepth) {
    fail(res, bad_request(fmt::format("the body of the request is nested deeper than {} levels", kMaxDepth)));
    return std::nullopt;
  }
  json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded()) {
    auto docs = storage::dws::yaml_documents(req.body);  // kubectl sends JSON, people send YAML
    if (docs && docs->size() == 1) return (*docs)[0];
    fail(res, bad_request("the body of the request is not valid JSON"));
    return std::nullopt;
  }
  return j;
}

}  // namespace

ApiServer::ApiServer(ObjectStore& store, const CrdCatalog& catalog, const WorkflowAdmission& admission,
                     FaultTable& faults, NnfDriver& driver, ApiConfig cfg)
    : store_(store),
      catalog_(catalog),
      admission_(admission),
      faults_(faults),
      driver_(driver),
      cfg_(std::move(cfg)),
      server_(cfg_.tls_cert.empty()
                  ? std::make_unique<httplib::Server>()
                  : std::make_unique<httplib::SSLServer>(cfg_.tls_cert.c_str(), cfg_.tls_key.c_str())) {
  int threads = cfg_.threads;
  // httplib owns the queue it is handed (its API takes a raw pointer).
  server_->new_task_queue = [threads] { return std::make_unique<httplib::ThreadPool>(threads).release(); };
  // Up to twice the limit reaches parse_body, which answers with a Status as the API server
  // does; httplib refuses anything larger with a bare 413 before reading it.
  server_->set_payload_max_length(2 * kMaxBody);
  server_->set_tcp_nodelay(true);  // a reply is written in pieces: without it Nagle holds the last one 40 ms
  server_->set_keep_alive_max_count(1000000);
  server_->set_keep_alive_timeout(60);
  routes();
}

ApiServer::~ApiServer() { stop(); }

int ApiServer::bind(const std::string& host, int port) {
  if (!server_->is_valid()) return -1;
  if (port == 0) return server_->bind_to_any_port(host);
  return server_->bind_to_port(host, port) ? port : -1;
}

void ApiServer::serve() { server_->listen_after_bind(); }
void ApiServer::stop() {
  store_.cut_watches();
  server_->stop();
}

bool ApiServer::authorized(const httplib::Request& req, httplib::Response& res) const {
  if (down_until_ms_.load() > now_ms() && req.path.rfind("/emu/", 0) != 0) {
    fail(res, ApiError{503, "ServiceUnavailable", "the server is currently unable to handle the request", {}});
    return false;
  }
  if (cfg_.token.empty() || req.get_header_value("Authorization") == "Bearer " + cfg_.token) return true;
  fail(res, ApiError{401, "Unauthorized", "Unauthorized", {}});
  return false;
}

void ApiServer::routes() {
  auto& s = *server_;
  const std::string gv = catalog_.group() + "/" + catalog_.version();
  s.Get("/version", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    reply(res, 200,
          {{"major", "1"}, {"minor", "32"}, {"gitVersion", "v1.32.0-corral-dws-emu"}, {"platform", "linux/amd64"}});
  });
  s.Get("/api", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    reply(res, 200,
          {{"kind", "APIVersions"},
           {"versions", {"v1"}},
           {"serverAddressByClientCIDRs", json::array({{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", ""}}})}});
  });
  s.Get("/api/v1", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    reply(res, 200,
          {{"kind", "APIResourceList"},
           {"groupVersion", "v1"},
           {"resources", json::array({{{"name", "events"},
                                       {"singularName", "event"},
                                       {"namespaced", true},
                                       {"kind", "Event"},
                                       {"verbs", {"get", "list", "watch"}},
                                       {"shortNames", {"ev"}}}})}});
  });
  s.Get(R"(/api/v1(/namespaces/[^/]+)?/events)", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    reply(res, 200,
          {{"kind", "EventList"},
           {"apiVersion", "v1"},
           {"metadata", {{"resourceVersion", std::to_string(store_.current_rv())}}},
           {"items", json::array()}});
  });
  auto group_json = [this, gv] {
    json v = {{"groupVersion", gv}, {"version", catalog_.version()}};
    return json{{"kind", "APIGroup"},
                {"apiVersion", "v1"},
                {"name", catalog_.group()},
                {"versions", json::array({v})},
                {"preferredVersion", v}};
  };
  s.Get("/apis", [this, group_json](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    json g = group_json();
    g.erase("kind");
    g.erase("apiVersion");
    reply(res, 200, {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", json::array({g})}});
  });
  s.Get("/apis/" + catalog_.group(), [this, group_json](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    reply(res, 200, group_json());
  });
  s.Get("/apis/" + gv, [this, gv](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    json resources = json::array();
    for (const auto& k : catalog_.kinds()) {
      resources.push_back(
          {{"name", k.plural},
           {"singularName", k.singular},
           {"namespaced", k.namespaced},
           {"kind", k.kind},
           {"verbs", {"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}}});
      if (k.status_subresource)
        resources.push_back({{"name", k.plural + "/status"},
                             {"singularName", ""},
                             {"namespaced", k.namespaced},
                             {"kind", k.kind},
                             {"verbs", {"get", "patch", "update"}}});
    }
    reply(res, 200,
          {{"kind", "APIResourceList"}, {"apiVersion", "v1"}, {"groupVersion", gv}, {"resources", resources}});
  });
  // OpenAPI v3: kubectl reads it to learn that the server validates fields itself
  // (fieldValidation), and for `kubectl explain`.
  s.Get("/openapi/v3", [this, gv](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    reply(res, 200, {{"paths", {{"apis/" + gv, {{"serverRelativeURL", "/openapi/v3/apis/" + gv + "?hash=1"}}}}}});
  });
  s.Get("/openapi/v3/apis/" + gv, [this, gv](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    reply(res, 200, openapi_v3());
  });
  const std::string pattern = "/apis/" + gv + "/.*";
  auto handler = [this](const httplib::Request& req, httplib::Response& res) { resource(req, res); };
  s.Get(pattern, handler);
  s.Post(pattern, handler);
  s.Put(pattern, handler);
  s.Patch(pattern, handler);
  s.Delete(pattern, handler);
  auto admin_handler = [this](const httplib::Request& req, httplib::Response& res) { admin(req, res); };
  s.Get("/emu/v1/.*", admin_handler);
  s.Post("/emu/v1/.*", admin_handler);
}

json ApiServer::openapi_v3() const {
  json params = json::array({{{"name", "fieldValidation"}, {"in", "query"}, {"schema", {{"type", "string"}}}},
                             {{"name", "dryRun"}, {"in", "query"}, {"schema", {{"type", "string"}}}}});
  json paths = json::object(), schemas = json::object();
  std::string reversed_group;  // io.github.dataworkflowservices
  {
    std::vector<std::string> parts;
    std::string g = catalog_.group();
    for (size_t i = 0; i <= g.size();) {
      size_t j = g.find('.', i);
      if (j == std::string::npos) j = g.size();
      parts.insert(parts.begin(), g.substr(i, j - i));
      i = j + 1;
    }
    for (const auto& p : parts) reversed_group += (reversed_group.empty() ? "" : ".") + p;
  }
  for (const auto& k : catalog_.kinds()) {
    std::string id = reversed_group + "." + catalog_.version() + "." + k.kind;
    json gvk = json::array({{{"group", k.group}, {"version", k.version}, {"kind", k.kind}}});
    json schema = k.schema;
    schema["x-kubernetes-group-version-kind"] = gvk;
    schemas[id] = schema;
    json ok = {{"200",
                {{"description", "OK"},
                 {"content", {{"application/json", {{"schema", {{"$ref", "#/components/schemas/" + id}}}}}}}}}};
    std::string base = "/apis/" + k.api_version() + "/namespaces/{namespace}/" + k.plural;
    paths[base] = {{"post", {{"parameters", params}, {"responses", ok}, {"x-kubernetes-group-version-kind", gvk[0]}}}};
    paths[base + "/{name}"] = {
        {"put", {{"parameters", params}, {"responses", ok}, {"x-kubernetes-group-version-kind", gvk[0]}}},
        {"patch", {{"parameters", params}, {"responses", ok}, {"x-kubernetes-group-version-kind", gvk[0]}}}};
  }
  return {{"openapi", "3.0.0"},
          {"info", {{"title", "Kubernetes CRD Swagger"}, {"version", "v0.1.0"}}},
          {"paths", paths},
          {"components", {{"schemas", schemas}}}};
}

void ApiServer::resource(const httplib::Request& req, httplib::Response& res) {
  if (!authorized(req, res)) return;
  // /apis/G/V[/namespaces/NS]/PLURAL[/NAME[/status]]
  std::string rest = req.path.substr(("/apis/" + catalog_.group() + "/" + catalog_.version() + "/").size());
  std::vector<std::string> parts;
  for (size_t i = 0; i <= rest.size();) {
    size_t j = rest.find('/', i);
    if (j == std::string::npos) j = rest.size();
    parts.push_back(rest.substr(i, j - i));
    i = j + 1;
  }
  std::string ns;
  if (parts.size() >= 3 && parts[0] == "namespaces") {
    ns = parts[1];
    parts.erase(parts.begin(), parts.begin() + 2);
  }
  const KindInfo* k = parts.empty() ? nullptr : catalog_.by_plural(parts[0]);
  if (!k || parts.size() > 3 || (parts.size() == 3 && parts[2] != "status") ||
      (parts.size() == 3 && !k->status_subresource)) {
    fail(res, ApiError{404, "NotFound", "the server could not find the requested resource", {}});
    return;
  }
  if (!k->namespaced) ns.clear();
  if (parts.size() == 1) {
    if (req.method == "GET") return list_or_watch(*k, ns, req, res);
    if (req.method == "POST") {
      if (ns.empty() && k->namespaced) return fail(res, bad_request("a namespace is required to create a " + k->kind));
      return create(*k, ns, req, res);
    }
    if (req.method == "DELETE") {
      auto sel = Selector::parse(req.get_param_value("labelSelector"), req.get_param_value("fieldSelector"));
      if (!sel) return fail(res, bad_request(sel.error().message));
      auto page = store_.list(*k, ns, *sel, 0, "");
      json items = json::array();
      for (const auto& o : page.items) {
        auto r = store_.remove(*k, (*o)["metadata"].value("namespace", ""), (*o)["metadata"].value("name", ""));
        if (r) items.push_back(**r);
      }
      return reply(res, 200,
                   {{"apiVersion", k->api_version()},
                    {"kind", k->list_kind},
                    {"metadata", {{"resourceVersion", std::to_string(store_.current_rv())}}},
                    {"items", items}});
    }
    return fail(
        res, ApiError{405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {}});
  }
  const std::string& name = parts[1];
  bool status = parts.size() == 3;
  if (req.method == "GET") {
    auto r = store_.get(*k, ns, name);
    if (!r) return fail(res, r.error());
    if (wants_table(req)) return reply(res, 200, table(*k, {*r}, store_.current_rv()));
    return reply(res, 200, **r);
  }
  if (req.method == "PUT" || req.method == "PATCH") return write(*k, ns, name, status, req, res);
  if (req.method == "DELETE" && !status) return remove(*k, ns, name, res);
  fail(res, ApiError{405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {}});
}

void ApiServer::list_or_watch(const KindInfo& k, const std::string& ns, const httplib::Request& req,
                              httplib::Response& res) {
  std::string w = req.get_param_value("watch");
  if (w == "true" || w == "True" || w == "TRUE" || w == "t" || w == "T" || w == "1") return watch(k, ns, req, res);
  auto sel = Selector::parse(req.get_param_value("labelSelector"), req.get_param_value("fieldSelector"));
  if (!sel) return fail(res, bad_request(sel.error().message));
  size_t limit = 0;
  if (req.has_param("limit")) limit = std::strtoul(req.get_param_value("limit").c_str(), nullptr, 10);
  auto page = store_.list(k, ns, *sel, limit, req.get_param_value("continue"));
  if (wants_table(req)) {
    json t = table(k, page.items, page.rv);
    if (!page.next.empty()) t["metadata"]["continue"] = page.next;
    return reply(res, 200, t);
  }
  // Serialized by hand: a list of thousands of objects would otherwise be copied once more.
  std::string body = fmt::format(R"({{"apiVersion":"{}","kind":"{}","metadata":{{"resourceVersion":"{}")",
                                 k.api_version(), k.list_kind, page.rv);
  if (!page.next.empty()) body += ",\"continue\":" + json(page.next).dump();
  body += "},\"items\":[";
  for (size_t i = 0; i < page.items.size(); ++i) {
    if (i) body += ',';
    body += page.items[i]->dump();
  }
  body += "]}";
  res.status = 200;
  res.set_content(std::move(body), "application/json");
}

void ApiServer::watch(const KindInfo& k, const std::string& ns, const httplib::Request& req, httplib::Response& res) {
  auto sel = Selector::parse(req.get_param_value("labelSelector"), req.get_param_value("fieldSelector"));
  if (!sel) return fail(res, bad_request(sel.error().message));
  struct State {
    uint64_t since = 0;
    bool initial = false;  // send the current objects first (resourceVersion "" or "0")
    bool done = false;
    uint64_t cut;
    std::chrono::steady_clock::time_point deadline;
    std::chrono::steady_clock::time_point next_bookmark;
  };
  auto st = std::make_shared<State>();
  std::string rv = req.get_param_value("resourceVersion");
  if (rv.empty() || rv == "0") {
    st->initial = true;
  } else {
    char* end = nullptr;
    st->since = std::strtoull(rv.c_str(), &end, 10);
    if (!end || *end) return fail(res, bad_request("invalid resource version: " + rv));
  }
  st->cut = store_.cut_generation();
  double timeout =
      req.has_param("timeoutSeconds") ? std::strtod(req.get_param_value("timeoutSeconds").c_str(), nullptr) : 1800.0;
  auto now = std::chrono::steady_clock::now();
  st->deadline = now + std::chrono::milliseconds(static_cast<long>(timeout * 1000));
  std::string bm = req.get_param_value("allowWatchBookmarks");
  bool bookmarks = bm == "true" || bm == "True" || bm == "1";
  auto interval = std::chrono::milliseconds(static_cast<long>(cfg_.bookmark_interval * 1000));
  st->next_bookmark = bookmarks ? now + interval : st->deadline;
  bool as_table = wants_table(req);
  const KindInfo* kp = &k;
  auto selector = std::make_shared<Selector>(std::move(*sel));
  res.set_chunked_content_provider(
      "application/json", [this, st, kp, ns, selector, as_table, bookmarks, interval](size_t, httplib::DataSink& sink) {
        // One watch line; `text`, when given, is the object already serialized.
        auto line = [&](const std::string& type, const ObjectPtr& obj, const std::string* text = nullptr) {
          if (as_table && type != "ERROR" && type != "BOOKMARK")
            return json{{"type", type}, {"object", table(*kp, {obj}, 0)}}.dump() + "\n";
          return R"({"type":")" + type + R"(","object":)" + (text ? *text : obj->dump()) + "}\n";
        };
        auto send = [&](const std::string& type, const json& obj) {
          std::string l = line(type, std::make_shared<const json>(obj));
          return sink.write(l.data(), l.size());
        };
        if (st->done) {
          sink.done();
          return true;
        }
        if (st->initial) {
          st->initial = false;
          auto page = store_.list(*kp, ns, *selector, 0, "");
          st->since = page.rv;
          std::string batch;
          for (const auto& o : page.items) batch += line("ADDED", o);
          return batch.empty() || sink.write(batch.data(), batch.size());
        }
        std::vector<EventPtr> evs;
        auto until = std::min(st->deadline, st->next_bookmark);
        switch (store_.wait_events(*kp, st->since, until, st->cut, evs, 512)) {
          case ObjectStore::Wait::events: {
            // Everything that is ready goes out in one write: one TLS record and one wakeup of
            // the client for a burst, instead of one per event.
            std::string batch;
            for (const auto& e : evs) {
              st->since = e->rv;
              if (e->kind != kp) continue;
              const auto& m = (*e->obj)["metadata"];
              if (!ns.empty() && m.value("namespace", "") != ns) continue;
              if (!selector->matches(*e->obj)) continue;
              batch += line(e->type, e->obj, &e->text);
            }
            return batch.empty() || sink.write(batch.data(), batch.size());
          }
          case ObjectStore::Wait::timeout:
            if (std::chrono::steady_clock::now() >= st->deadline) {
              st->done = true;
              return true;
            }
            st->next_bookmark = std::chrono::steady_clock::now() + interval;
            if (bookmarks)
              return send("BOOKMARK", {{"kind", kp->kind},
                                       {"apiVersion", kp->api_version()},
                                       {"metadata", {{"resourceVersion", std::to_string(st->since)}}}});
            return true;
          case ObjectStore::Wait::expired:
            st->done = true;
            return send("ERROR", status_body(gone_error(fmt::format("too old resource version: {} ({})", st->since,
                                                                    store_.current_rv()))));
          case ObjectStore::Wait::cut:
            return false;  // the connection is dropped, as when an API server goes away
        }
        return false;
      });
}

void ApiServer::create(const KindInfo& k, const std::string& ns, const httplib::Request& req, httplib::Response& res) {
  auto body = parse_body(req, res);
  if (!body) return;
  json obj = std::move(*body);
  if (!obj.is_object()) return fail(res, bad_request("the body of the request must be an object"));
  if (obj.value("apiVersion", "") != k.api_version() || obj.value("kind", "") != k.kind)
    return fail(res,
                bad_request(fmt::format("the API version and kind in the data ({} {}) do not match the expected {} {}",
                                        obj.value("apiVersion", ""), obj.value("kind", ""), k.api_version(), k.kind)));
  if (!obj.contains("metadata") || !obj["metadata"].is_object()) obj["metadata"] = json::object();
  auto& m = obj["metadata"];
  if (!m.contains("name") && m.contains("generateName") && m["generateName"].is_string()) {
    static constexpr char kChars[] = "bcdfghjklmnpqrstvwxz2456789";
    thread_local std::mt19937 rng{std::random_device{}()};
    std::string n = m["generateName"].get<std::string>();
    for (int i = 0; i < 5; ++i) n += kChars[rng() % (sizeof kChars - 1)];
    m["name"] = n;
  }
  std::string name = m.contains("name") && m["name"].is_string() ? m["name"].get<std::string>() : "";
  if (name.empty())
    return fail(
        res, invalid_error(
                 k, "", {{"metadata.name", "FieldValueRequired", "Required value: name or generateName is required"}}));
  if (!valid_name(name))
    return fail(
        res,
        invalid_error(
            k, name,
            {{"metadata.name", "FieldValueInvalid",
              fmt::format("Invalid value: \"{}\": a lowercase RFC 1123 subdomain must consist of lower case "
                          "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                          name)}}));
  if (m.contains("namespace") && m["namespace"] != ns && k.namespaced)
    return fail(res,
                bad_request("the namespace of the provided object does not match the namespace sent on the request"));
  if (k.status_subresource) obj.erase("status");
  if (k.kind == "Workflow")
    if (auto err = admission_.admit_create(obj)) return fail(res, *err);
  std::vector<std::string> pruned;
  auto errs = apply_schema(k.schema, obj, &pruned);
  if (auto e = strict_fields(req, k, pruned)) return fail(res, *e);
  if (!errs.empty()) return fail(res, invalid_error(k, name, errs));
  auto r = store_.create(k, ns, std::move(obj));
  if (!r) return fail(res, r.error());
  reply_text(res, 201, store_.serialized(*r));
}

void ApiServer::write(const KindInfo& k, const std::string& ns, const std::string& name, bool status,
                      const httplib::Request& req, httplib::Response& res) {
  bool put = req.method == "PUT";
  std::string ctype = req.get_header_value("Content-Type");
  if (!put && ctype.find("merge-patch+json") == std::string::npos && ctype.find("json-patch+json") == std::string::npos)
    return fail(res, ApiError{415,
                              "UnsupportedMediaType",
                              "the body of the request was in an unknown format - accepted media types include: "
                              "application/json-patch+json, application/merge-patch+json",
                              {}});
  auto body = parse_body(req, res);
  if (!body) return;
  json patch = std::move(*body);
  auto edit = [&](const json& old, json& obj) -> std::optional<ApiError> {
    if (put) {
      if (!patch.is_object()) return bad_request("the body of the request must be an object");
      obj = patch;
      if (!obj.contains("metadata") || !obj["metadata"].is_object() || !obj["metadata"].contains("resourceVersion"))
        return invalid_error(
            k, name,
            {{"metadata.resourceVersion", "FieldValueInvalid", "Invalid value: 0x0: must be specified for an update"}});
    } else if (ctype.find("json-patch+json") != std::string::npos) {
      try {
        obj = old.patch(patch);
      } catch (const json::exception& e) {
        return ApiError{422, "Invalid", std::string("the JSON patch could not be applied: ") + e.what(), {}};
      }
    } else {
      obj.merge_patch(patch);
    }
    if (!obj.is_object()) return bad_request("the result is not an object");
    obj["apiVersion"] = k.api_version();
    obj["kind"] = k.kind;
    if (!obj.contains("metadata") || !obj["metadata"].is_object()) obj["metadata"] = json::object();
    if (!status && k.status_subresource) {
      if (old.contains("status"))
        obj["status"] = old["status"];
      else
        obj.erase("status");
    }
    std::vector<std::string> pruned;
    auto errs = apply_schema(k.schema, obj, &pruned);
    if (auto e = strict_fields(req, k, pruned)) return e;
    if (!errs.empty()) return invalid_error(k, name, errs);
    if (k.kind == "Workflow") return admission_.admit_update(old, obj);
    return std::nullopt;
  };
  auto r = store_.modify(k, ns, name, status ? Part::status : (k.status_subresource ? Part::main : Part::all), edit);
  if (!r) return fail(res, r.error());
  reply_text(res, 200, store_.serialized(*r));
}

void ApiServer::remove(const KindInfo& k, const std::string& ns, const std::string& name, httplib::Response& res) {
  auto r = store_.remove(k, ns, name);
  if (!r) return fail(res, r.error());
  reply_text(res, 200, store_.serialized(*r));
}

void ApiServer::admin(const httplib::Request& req, httplib::Response& res) {
  if (!cfg_.token.empty() && req.get_header_value("Authorization") != "Bearer " + cfg_.token)
    return fail(res, ApiError{401, "Unauthorized", "Unauthorized", {}});
  const std::string what = req.path.substr(std::string("/emu/v1/").size());
  json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
  if (body.is_discarded()) return fail(res, bad_request("the body is not JSON"));
  if (what == "faults") {
    if (req.method == "POST") {
      if (auto st = faults_.set(body); !st) return fail(res, bad_request(st.message()));
      driver_.poke_all();
    }
    return reply(res, 200, faults_.to_json());
  }
  if (what == "watches/cut" && req.method == "POST") {
    store_.cut_watches();
    return reply(res, 200, {{"cut", true}});
  }
  if (what == "down" && req.method == "POST") {
    double secs = body.value("seconds", 5.0);
    down_until_ms_ = now_ms() + static_cast<int64_t>(secs * 1000);
    store_.cut_watches();
    return reply(res, 200, {{"down", secs}});
  }
  if (what == "stats")
    return reply(res, 200, {{"objects", store_.object_count()}, {"resourceVersion", store_.current_rv()}});
  if (what.rfind("rabbits/", 0) == 0 && req.method == "POST") {
    const KindInfo* sk = catalog_.by_kind("Storage");
    std::string rabbit = what.substr(8);
    std::string health = body.value("status", "Ready");
    auto r = store_.modify(*sk, "default", rabbit, Part::all, [&](const json&, json& o) -> std::optional<ApiError> {
      o["status"]["status"] = health;
      for (auto& s : o["status"]["access"]["servers"]) s["status"] = health;
      return std::nullopt;
    });
    if (!r) return fail(res, r.error());
    driver_.poke_all();
    return reply(res, 200, **r);
  }
  fail(res, ApiError{404, "NotFound", "no such emulator endpoint: " + req.path, {}});
}

}  // namespace corral::emu::dws
