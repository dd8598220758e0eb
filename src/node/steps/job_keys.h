// The step-credential keys of the jobs on this agent's nodes, as the controller sends them
// (wrapped under the connection's session key, job/key_wrap.h): an agent needs no cluster
// key of its own to check step credentials. Lives on the agent's event loop.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "agent.pb.h"
#include "util/result.h"

namespace corral::node {

class JobKeys {
 public:
  // Bounds memory when forgets are lost: past this, the lowest (oldest) job ids go first.
  static constexpr size_t kMaxKeys = 65536;

  // A new connection: keys come wrapped under this one from now on (empty: none usable).
  void set_session_key(std::string key) { session_key_ = std::move(key); }
  Result<std::string> unwrap(const std::string& wrapped) const;
  // Unwraps and keeps the key; a key that does not unwrap is an error naming the job.
  Status add(const v1::JobKey& key);
  const std::string* find(uint64_t jobid) const;
  void drop(uint64_t jobid) { keys_.erase(jobid); }
  size_t size() const { return keys_.size(); }

 private:
  std::string session_key_;
  std::map<uint64_t, std::string> keys_;
};

}  // namespace corral::node
