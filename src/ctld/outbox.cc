#include "ctld/outbox.h"

#include <utility>

#include <spdlog/spdlog.h>

namespace corral::ctld {

void Outbox::push(std::function<void()> action, Urgency urgency) {
  MutexLock lk(mu_);
  pending_.emplace_back(gen_, std::move(action));
  unsealed_ = true;
  urgent_ = urgent_ || urgency == Urgency::now;
}

void Outbox::seal() {
  uint64_t g;
  bool urgent;
  {
    MutexLock lk(mu_);
    if (!unsealed_) return;
    unsealed_ = false;
    urgent = std::exchange(urgent_, false);
    g = gen_++;
  }
  auto done = [this, g](const Status& st) {
    if (!st.ok()) spdlog::critical("state store commit failed: {}", st.message());
    release(g);
  };
  if (urgent)
    store_.on_durable(std::move(done));
  else
    store_.on_durable_soon(std::move(done));
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
