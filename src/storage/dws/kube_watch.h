// One kind's objects kept in step with the API server: a list, then a watch from the
// list's resourceVersion that resumes from the last version seen when the stream ends,
// lists again when the server answers 410 Gone (the version left its history), and
// reconnects with a doubling backoff (0.1 s to 5 s) while the server cannot be reached.
// No polling: between changes the thread waits in the stream.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "storage/dws/kube_client.h"

namespace corral::storage::dws {

struct WatchSink {
  // Every object of the collection, after each (re)list: whatever is not there is gone.
  std::function<void(std::vector<nlohmann::json>& items)> on_list;
  // ADDED / MODIFIED / DELETED events ({"type", "object"}) that arrived together.
  std::function<void(std::vector<nlohmann::json>& events)> on_events;
  // A failure the watch recovers from by itself (for the log).
  std::function<void(const std::string& why)> on_trouble;
  // Fields of the objects no handler reads, left out of the events (not of lists).
  std::vector<JsonPath> omit;
};

struct WatchCounters {
  unsigned lists = 0;
  unsigned reconnects = 0;
};

class KubeWatch {
 public:
  // `collection`: "/apis/GROUP/VERSION[/namespaces/NS]/PLURAL" (a query may follow with
  // `query`, e.g. "labelSelector=...").
  KubeWatch(std::shared_ptr<const KubeConfig> cfg, std::string collection, std::string query, WatchSink sink);
  ~KubeWatch();
  KubeWatch(const KubeWatch&) = delete;
  KubeWatch& operator=(const KubeWatch&) = delete;

  void start();
  void stop();
  WatchCounters counters() const;

 private:
  void run();
  bool list();
  void watch();
  void pause(double seconds);

  std::string collection_, query_;
  WatchSink sink_;
  KubeClient client_;
  std::string rv_;  // the version to resume from; empty: list first
  double backoff_ = 0.1;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;   // under mu_
  WatchCounters counters_;  // under mu_
  std::thread thread_;
};

}  // namespace corral::storage::dws
