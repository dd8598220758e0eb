#include "ctld/outbox.h"

#include <spdlog/spdlog.h>

namespace corral::ctld {

void Outbox::push(std::function<void()> action) {
  MutexLock lk(mu_);
  pending_.emplace_back(gen_, std::move(action));
  unsealed_ = true;
}

void Outbox::seal() {
  uint64_t g;
  {
    MutexLock lk(mu_);
    if (!unsealed_) return;
    unsealed_ = false;
    g = gen_++;
  }
  store_.on_durable([this, g](const Status& st) {
    if (!st.ok()) spdlog::critical("state store commit failed: {}", st.message());
    release(g);
  });
}

void Outbox::release(uint64_t upto) {
  std::vector<std::function<void()>> ready;
  {
    MutexLock lk(mu_);
    while (!pending_.empty() && pending_.front().first <= upto) {
      ready.push_back(std::move(pending_.front().second));
      pending_.pop_front();
    }
  }
  for (auto& fn : ready) fn();
}

}  // namespace corral::ctld
