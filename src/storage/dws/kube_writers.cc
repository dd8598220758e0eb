#include "storage/dws/kube_writers.h"

#include <pthread.h>
#include <chrono>

#include <spdlog/spdlog.h>

namespace corral::storage::dws {

KubeWriters::KubeWriters(std::shared_ptr<const KubeConfig> cfg, unsigned threads) {
  for (unsigned i = 0; i < threads; ++i) {
    auto lane = std::make_unique<Lane>();
    lane->client = std::make_unique<KubeClient>(cfg);
    lanes_.push_back(std::move(lane));
  }
  for (auto& lane : lanes_)
    lane->thread = std::thread([this, l = lane.get()] {
      pthread_setname_np(pthread_self(), "dws-writer");
      run(*l);
    });
}

KubeWriters::~KubeWriters() { stop(); }

void KubeWriters::stop() {
  stopping_ = true;
  pause_cv_.notify_all();
  for (auto& lane : lanes_) {
    // Taking the lane's lock orders the flag before a waiter's check of it: no lost wakeup.
    { std::lock_guard<std::mutex> lk(lane->mu); }
    lane->cv.notify_all();
    lane->client->interrupt();
  }
  for (auto& lane : lanes_)
    if (lane->thread.joinable()) lane->thread.join();
}

size_t KubeWriters::pending() const { return pending_; }

void KubeWriters::post(const std::string& key, Op op) {
  Lane& lane = *lanes_[std::hash<std::string>{}(key) % lanes_.size()];
  ++pending_;
  {
    std::lock_guard<std::mutex> lk(lane.mu);
    lane.ops.push_back(std::move(op));
  }
  lane.cv.notify_one();
}

void KubeWriters::run(Lane& lane) {
  Writer w{*lane.client, *this};
  while (true) {
    Op op;
    {
      std::unique_lock<std::mutex> lk(lane.mu);
      lane.cv.wait(lk, [&] { return stopping_ || !lane.ops.empty(); });
      if (stopping_) return;
      op = std::move(lane.ops.front());
      lane.ops.pop_front();
    }
    try {
      op(w);
    } catch (const std::exception& e) {  // an answer of a shape nobody expected: that write is lost
      spdlog::warn("kubernetes writer: {}", e.what());
    }
    --pending_;
  }
}

bool KubeWriters::pause(double seconds) {
  std::unique_lock<std::mutex> lk(pause_mu_);
  return !pause_cv_.wait_for(lk, std::chrono::duration<double>(seconds), [&] { return stopping_.load(); });
}

Result<KubeReply> KubeWriters::Writer::call(const std::function<Result<KubeReply>(KubeClient&)>& fn) {
  double backoff = 0.1;
  while (true) {
    auto r = fn(client);
    bool retry = !r ? r.error().code == Errc::unavailable : (r->http >= 500 || r->http == 429);
    if (!retry || owner.stopping_) return r;
    if (!owner.pause(backoff)) return r;
    backoff = std::min(5.0, backoff * 2);
  }
}

}  // namespace corral::storage::dws
