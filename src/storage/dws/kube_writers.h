// Writes to the Kubernetes API server off the controller's lock. The writes of one key (a
// workflow) run in the order posted, on one of a few threads that each keep a connection;
// a write the server could not take now (no connection, 5xx, 429) is retried with a
// doubling backoff until it is answered or the writers stop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "storage/dws/kube_client.h"

namespace corral::storage::dws {

class KubeWriters {
 public:
  // What an op gets: its thread's client, and `call` that retries a request.
  struct Writer {
    KubeClient& client;
    KubeWriters& owner;
    // nullopt only when stopping.
    Result<KubeReply> call(const std::function<Result<KubeReply>(KubeClient&)>& fn);
  };
  using Op = std::function<void(Writer&)>;

  KubeWriters(std::shared_ptr<const KubeConfig> cfg, unsigned threads);
  ~KubeWriters();
  KubeWriters(const KubeWriters&) = delete;
  KubeWriters& operator=(const KubeWriters&) = delete;

  void post(const std::string& key, Op op);
  void stop();
  size_t pending() const;
  bool stopping() const { return stopping_; }

 private:
  struct Lane {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Op> ops;
    std::thread thread;
    std::unique_ptr<KubeClient> client;
  };
  void run(Lane& lane);
  // Sleeps unless stopping; false when stopping.
  bool pause(double seconds);

  std::vector<std::unique_ptr<Lane>> lanes_;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> pending_{0};
  std::mutex pause_mu_;
  std::condition_variable pause_cv_;
};

}  // namespace corral::storage::dws
