#include "net/replay_cache.h"

#include <cstring>

namespace corral::net {

Status ReplayCache::remember(std::string_view key, int64_t expires, int64_t now) {
  if (key.size() != kKeyBytes) return invalid("a replay key is 16 bytes");
  Key k;
  std::memcpy(&k.hi, key.data(), 8);
  std::memcpy(&k.lo, key.data() + 8, 8);
  std::lock_guard lock(mu_);
  drop_expired(now);
  if (seen_.count(k) != 0) return denied("the credential was used before (a replay)");
  if (seen_.size() >= capacity_)
    return Error{Errc::unavailable, "too many credentials in the last minute; try again shortly"};
  seen_.insert(k);
  by_expiry_.emplace(expires, k);
  return {};
}

size_t ReplayCache::size() const {
  std::lock_guard lock(mu_);
  return seen_.size();
}

void ReplayCache::drop_expired(int64_t now) {
  auto end = by_expiry_.lower_bound(now);  // a credential is still good at its expiry second
  for (auto it = by_expiry_.begin(); it != end; ++it) seen_.erase(it->second);
  by_expiry_.erase(by_expiry_.begin(), end);
}

}  // namespace corral::net
