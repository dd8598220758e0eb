#include "storage/dws/kube_writers.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <utility>

#include <spdlog/spdlog.h>

namespace corral::storage::dws {

using Clock = std::chrono::steady_clock;

struct KubeWriters::Running {
  std::string key;
  Op op;  // kept here, unmoved, while the coroutine runs: its captures live in it
  Task task;
};

// Everything the writers' thread owns; only post() and stop() reach in from outside,
// through `mu` and curl_multi_wakeup.
struct KubeWriters::Loop {
  KubeWriters& owner;
  Writer writer{owner};
  CURLM* multi = curl_multi_init();
  std::vector<std::unique_ptr<KubeClient>> clients;
  std::vector<KubeClient*> idle;
  std::map<CURL*, std::pair<KubeClient*, Call*>> active;
  std::deque<Call*> waiting;                                // requests for a free connection
  std::multimap<Clock::time_point, Call*> retries;          // requests to send again, by when
  std::map<std::string, std::deque<Op>> queued;             // key -> its ops not yet started
  std::map<std::string, std::unique_ptr<Running>> running;  // key -> its op under way
  std::deque<std::string> ready;                            // keys whose next op may start
  Running* current = nullptr;                               // the op being resumed

  std::mutex mu;
  std::vector<std::pair<std::string, Op>> posted;
  bool woken = false;

  Loop(KubeWriters& o, const std::shared_ptr<const KubeConfig>& cfg, unsigned connections) : owner(o) {
    for (unsigned i = 0; i < std::max(1u, connections); ++i) {
      clients.push_back(std::make_unique<KubeClient>(cfg));
      idle.push_back(clients.back().get());
    }
  }
  ~Loop() {
    for (auto& [easy, at] : active) curl_multi_remove_handle(multi, easy);
    active.clear();
    running.clear();  // destroys the suspended coroutines
    curl_multi_cleanup(multi);
  }

  void take_posted() {
    std::vector<std::pair<std::string, Op>> got;
    {
      std::lock_guard lk(mu);
      got.swap(posted);
      woken = false;
    }
    for (auto& [key, op] : got) {
      auto& q = queued[key];
      q.push_back(std::move(op));
      if (q.size() == 1 && !running.count(key)) ready.push_back(key);
    }
  }

  void resume(Running* r, std::coroutine_handle<> h) {
    current = r;
    h.resume();
    current = nullptr;
    if (!r->task.handle().done()) return;
    if (auto err = r->task.handle().promise().error) {
      try {
        std::rethrow_exception(err);
      } catch (const std::exception& e) {  // an answer of a shape nobody expected: that write is lost
        spdlog::warn("kubernetes writer: {}", e.what());
      }
    }
    const std::string key = r->key;
    running.erase(key);  // r is gone
    --owner.pending_;
    if (auto it = queued.find(key); it != queued.end() && !it->second.empty()) ready.push_back(key);
  }

  void start_ready() {
    while (!ready.empty()) {
      std::string key = std::move(ready.front());
      ready.pop_front();
      auto it = queued.find(key);
      if (it == queued.end() || it->second.empty() || running.count(key)) continue;
      auto run = std::make_unique<Running>(Running{key, std::move(it->second.front()), {}});
      it->second.pop_front();
      if (it->second.empty()) queued.erase(it);
      Running* r = run.get();
      running.emplace(key, std::move(run));
      current = r;
      r->task = r->op(writer);
      current = nullptr;
      resume(r, r->task.handle());
    }
  }

  void launch() {
    const auto now = Clock::now();
    while (!retries.empty() && retries.begin()->first <= now) {
      waiting.push_back(retries.begin()->second);
      retries.erase(retries.begin());
    }
    while (!waiting.empty() && !idle.empty()) {
      Call* c = waiting.front();
      waiting.pop_front();
      KubeClient* client = idle.back();
      idle.pop_back();
      CURL* easy = client->begin(c->req);
      curl_multi_add_handle(multi, easy);
      active.emplace(easy, std::make_pair(client, c));
    }
  }

  // Answers in: each goes back to its op, or waits to be sent again.
  void collect() {
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      CURL* easy = msg->easy_handle;
      const CURLcode rc = msg->data.result;
      curl_multi_remove_handle(multi, easy);
      auto it = active.find(easy);
      if (it == active.end()) continue;
      auto [client, c] = it->second;
      active.erase(it);
      idle.push_back(client);
      auto r = client->finish(c->req, rc);
      // Stopping: a waiting op is dropped, whatever came back (an error that would have
      // been retried resumed it with that error while the writers stopped).
      if (owner.stopping_) continue;
      bool retry = !r ? r.error().code == Errc::unavailable : (r->http >= 500 || r->http == 429);
      if (retry) {
        retries.emplace(
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(c->backoff)), c);
        c->backoff = std::min(5.0, c->backoff * 2);
        continue;
      }
      c->result = std::move(r);
      resume(c->run, c->waiter);
    }
  }

  int poll_ms() const {
    if (!ready.empty() || (!waiting.empty() && !idle.empty())) return 0;
    int ms = 1000;
    if (!retries.empty()) {
      auto d = std::chrono::duration_cast<std::chrono::milliseconds>(retries.begin()->first - Clock::now()).count();
      ms = static_cast<int>(std::clamp<long long>(d + 1, 0, ms));
    }
    return ms;
  }
};

void KubeWriters::Call::await_suspend(std::coroutine_handle<> h) {
  waiter = h;
  run = owner.loop_->current;
  owner.loop_->waiting.push_back(this);
}

KubeWriters::KubeWriters(std::shared_ptr<const KubeConfig> cfg, unsigned connections)
    : loop_(std::make_unique<Loop>(*this, cfg, connections)) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "dws-writer");
    run();
  });
}

KubeWriters::~KubeWriters() { stop(); }

void KubeWriters::stop() {
  stopping_ = true;
  curl_multi_wakeup(loop_->multi);
  if (thread_.joinable()) thread_.join();
}

size_t KubeWriters::pending() const { return pending_; }

void KubeWriters::post(const std::string& key, Op op) {
  ++pending_;
  bool wake = false;
  {
    std::lock_guard lk(loop_->mu);
    loop_->posted.emplace_back(key, std::move(op));
    wake = !std::exchange(loop_->woken, true);
  }
  if (wake) curl_multi_wakeup(loop_->multi);  // one wake-up for all posted before the loop looks
}

void KubeWriters::run() {
  Loop& l = *loop_;
  while (!stopping_) {
    l.take_posted();
    l.start_ready();
    l.launch();
    int in_flight = 0;
    curl_multi_perform(l.multi, &in_flight);
    l.collect();
    l.start_ready();
    l.launch();
    if (stopping_) break;
    curl_multi_poll(l.multi, nullptr, 0, l.poll_ms(), nullptr);
  }
}

}  // namespace corral::storage::dws
