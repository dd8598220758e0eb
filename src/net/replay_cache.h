// Credentials seen, so that each is taken once (as munged refuses a second decode). Bounded:
// an entry lives until its credential expires, and when the cache is full a credential is
// refused rather than an older one forgotten (forgetting would let that one be replayed).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "util/result.h"

namespace corral::net {

class ReplayCache {
 public:
  // About 100 bytes an entry: the default holds 300 s of 3,400 credentials a second.
  static constexpr size_t kDefaultCapacity = size_t{1} << 20;

  explicit ReplayCache(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  // Records `key` until `expires` (Unix seconds). permission_denied if it was seen before;
  // unavailable if the cache is full of unexpired entries. Thread-safe.
  Status remember(std::string_view key, int64_t expires, int64_t now);
  size_t size() const;

 private:
  void drop_expired(int64_t now);

  size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_set<std::string> seen_;
  std::multimap<int64_t, std::string> by_expiry_;
};

}  // namespace corral::net
