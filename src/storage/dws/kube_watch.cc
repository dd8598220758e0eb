#include "storage/dws/kube_watch.h"

#include <fmt/format.h>
#include <pthread.h>

namespace corral::storage::dws {
namespace {

using nlohmann::json;

constexpr double kMinBackoff = 0.1;
constexpr double kMaxBackoff = 5;
constexpr int kListPage = 500;
// The server ends each stream after this long; the watch resumes where it was.
constexpr int kStreamSeconds = 300;

std::string join_query(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "&" + b;
}

}  // namespace

KubeWatch::KubeWatch(std::shared_ptr<const KubeConfig> cfg, std::string collection, std::string query, WatchSink sink)
    : collection_(std::move(collection)), query_(std::move(query)), sink_(std::move(sink)), client_(std::move(cfg)) {}

KubeWatch::~KubeWatch() { stop(); }

void KubeWatch::start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "dws-watch");  // top -H tells the threads apart
    run();
  });
}

void KubeWatch::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  client_.interrupt();
  if (thread_.joinable()) thread_.join();
}

WatchCounters KubeWatch::counters() const {
  std::lock_guard<std::mutex> lk(mu_);
  return counters_;
}

void KubeWatch::pause(double seconds) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, std::chrono::duration<double>(seconds), [&] { return stopping_; });
  backoff_ = std::min(kMaxBackoff, backoff_ * 2);
}

void KubeWatch::run() {
  while (true) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stopping_) return;
    }
    if (rv_.empty() && !list()) {
      pause(backoff_);
      continue;
    }
    watch();
  }
}

// Lists every page; the objects go to the sink only once all are read.
bool KubeWatch::list() {
  std::vector<json> items;
  std::string cont, rv;
  do {
    std::string q = join_query(query_, fmt::format("limit={}", kListPage));
    if (!cont.empty()) q += "&continue=" + cont;
    auto r = client_.get(collection_ + "?" + q);
    if (!r || !r->ok()) {
      if (sink_.on_trouble) sink_.on_trouble(r ? reply_error(*r, "list " + collection_).message : r.message());
      return false;
    }
    const json& meta = r->body.value("metadata", json::object());
    for (auto& o : r->body["items"]) items.push_back(std::move(o));
    cont = meta.value("continue", "");
    rv = meta.value("resourceVersion", "");
  } while (!cont.empty());
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++counters_.lists;
  }
  rv_ = rv.empty() ? "0" : rv;
  backoff_ = kMinBackoff;
  if (sink_.on_list) sink_.on_list(items);
  return true;
}

void KubeWatch::watch() {
  std::string q = join_query(query_, fmt::format("watch=true&allowWatchBookmarks=true&timeoutSeconds={}&"
                                                 "resourceVersion={}",
                                                 kStreamSeconds, rv_));
  bool gone = false, got = false;
  auto http = client_.stream(collection_ + "?" + q, [&](std::vector<json>& events) {
    got = true;
    std::vector<json> batch;
    batch.reserve(events.size());
    for (auto& ev : events) {
      const std::string type = ev.value("type", "");
      json& obj = ev["object"];
      if (type == "ERROR") {
        if (obj.is_object() && obj.value("code", 0) == 410) gone = true;
        if (!gone && sink_.on_trouble) sink_.on_trouble("watch " + collection_ + ": " + obj.dump());
        break;
      }
      if (!obj.is_object()) continue;
      std::string rv = obj["metadata"].value("resourceVersion", "");
      if (!rv.empty()) rv_ = rv;
      if (type == "ADDED" || type == "MODIFIED" || type == "DELETED") batch.push_back(std::move(ev));
    }
    if (!batch.empty() && sink_.on_events) sink_.on_events(batch);
    return !gone;
  }, sink_.omit);
  if (gone || (http && *http == 410)) {
    rv_.clear();  // relist: the changes in between are lost to the watch
    return;
  }
  if (!http || *http >= 300) {
    if (http && *http == 404) rv_.clear();
    if (sink_.on_trouble)
      sink_.on_trouble(http ? fmt::format("watch {}: HTTP {}", collection_, *http) : http.message());
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++counters_.reconnects;
    }
    pause(backoff_);
    return;
  }
  if (got) backoff_ = kMinBackoff;
}

}  // namespace corral::storage::dws
