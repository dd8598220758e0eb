// Credentials seen, so that each is taken once (as munged refuses a second decode). Bounded:
// an entry lives until its credential expires, and when the cache is full a credential is
// refused rather than an older one forgotten (forgetting would let that one be replayed).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string_view>
#include <unordered_set>

#include "util/result.h"

namespace corral::net {

class ReplayCache {
 public:
  // About 100 bytes an entry: at most ~100 MiB, which holds a minute of 17,000
  // credentials a second (cluster-key credentials live 60 s).
  static constexpr size_t kDefaultCapacity = size_t{1} << 20;
  static constexpr size_t kKeyBytes = 16;  // a credential's nonce

  explicit ReplayCache(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  // Records `key` (kKeyBytes) until `expires` (Unix seconds). permission_denied if it was
  // seen before; unavailable if the cache is full of unexpired entries. Thread-safe.
  Status remember(std::string_view key, int64_t expires, int64_t now);
  size_t size() const;

 private:
  struct Key {
    uint64_t hi = 0, lo = 0;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return static_cast<size_t>(k.hi ^ (k.lo * 0x9e3779b97f4a7c15ULL)); }
  };
  void drop_expired(int64_t now);

  size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_set<Key, KeyHash> seen_;
  std::multimap<int64_t, Key> by_expiry_;
};

}  // namespace corral::net
