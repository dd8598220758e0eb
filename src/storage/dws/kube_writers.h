// Writes to the Kubernetes API server off the controller's lock. Each write is an op, a
// coroutine that awaits its requests (`co_await w.merge_patch(...)`); the ops of one key
// (a workflow) run one after another in the order posted, ops of different keys at once.
// One thread drives every request through curl's multi interface over a few kept-alive
// connections, so a burst of writes costs one wake-up for all the answers that arrived
// together instead of a thread's wake-up for each (on a 2-core machine a request answered
// while others are in flight costs the client half the CPU of one sent alone:
// docs/performance.md "Rabbit storage at 200 jobs/s"). A request the server could not take
// now (no connection, 5xx, 429) is sent again after a doubling backoff (0.1 s to 5 s)
// until it is answered or the writers stop.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "storage/dws/kube_client.h"

namespace corral::storage::dws {

class KubeWriters {
 public:
  class Task;
  struct Running;
  // One request as an op awaits it: the reply, or the transport's error. One the server
  // could not take now is sent again instead; when the writers stop, an op still waiting
  // is dropped without being resumed.
  struct Call {
    KubeWriters& owner;
    KubeRequest req;
    std::optional<Result<KubeReply>> result{};
    std::coroutine_handle<> waiter{};
    Running* run = nullptr;
    double backoff = 0.1;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h);
    Result<KubeReply> await_resume() { return std::move(*result); }
  };
  // What an op gets: requests to await.
  struct Writer {
    KubeWriters& owner;
    Call call(KubeRequest req) { return Call{owner, std::move(req)}; }
    Call get(std::string path) { return call({"GET", std::move(path), {}, {}}); }
    Call create(std::string path, const nlohmann::json& obj) {
      return call({"POST", std::move(path), obj.dump(), "application/json"});
    }
    Call merge_patch(std::string path, const nlohmann::json& patch) {
      return call({"PATCH", std::move(path), patch.dump(), "application/merge-patch+json"});
    }
    Call json_patch(std::string path, const nlohmann::json& ops) {
      return call({"PATCH", std::move(path), ops.dump(), "application/json-patch+json"});
    }
    Call remove(std::string path) { return call({"DELETE", std::move(path), {}, {}}); }
  };
  // An op's coroutine: started by the writers' thread, resumed as its requests are answered.
  class Task {
   public:
    struct promise_type {
      std::exception_ptr error;
      Task get_return_object() { return Task(std::coroutine_handle<promise_type>::from_promise(*this)); }
      std::suspend_always initial_suspend() noexcept { return {}; }
      std::suspend_always final_suspend() noexcept { return {}; }
      void return_void() {}
      void unhandled_exception() { error = std::current_exception(); }
    };
    Task() = default;
    explicit Task(std::coroutine_handle<promise_type> h) : h_(h) {}
    Task(Task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
    Task& operator=(Task&& o) noexcept {
      if (this != &o) {
        if (h_) h_.destroy();
        h_ = std::exchange(o.h_, {});
      }
      return *this;
    }
    ~Task() {
      if (h_) h_.destroy();
    }
    std::coroutine_handle<promise_type> handle() const { return h_; }

   private:
    std::coroutine_handle<promise_type> h_;
  };
  // The op's code: a coroutine, so captured values must be in the closure (the writers keep
  // it alive until the op ends) or copied into the frame, never references to the caller.
  using Op = std::function<Task(Writer&)>;

  // `connections`: requests in flight at once, each over a connection of its own.
  KubeWriters(std::shared_ptr<const KubeConfig> cfg, unsigned connections);
  ~KubeWriters();
  KubeWriters(const KubeWriters&) = delete;
  KubeWriters& operator=(const KubeWriters&) = delete;

  void post(const std::string& key, Op op);
  void stop();
  // Ops posted and not yet ended.
  size_t pending() const;
  bool stopping() const { return stopping_; }

 private:
  struct Loop;
  void run();

  std::unique_ptr<Loop> loop_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> pending_{0};
};

}  // namespace corral::storage::dws
