#include "node/steps/job_keys.h"

#include "job/key_wrap.h"

namespace corral::node {

Result<std::string> JobKeys::unwrap(const std::string& wrapped) const {
  if (session_key_.empty()) return denied("no session key from the controller to unwrap it with");
  return job::unwrap_key(session_key_, wrapped);
}

Status JobKeys::add(const v1::JobKey& key) {
  auto raw = unwrap(key.wrapped_key());
  if (!raw) return Error{raw.error().code, "the key of job " + std::to_string(key.jobid()) + ": " + raw.message()};
  keys_[key.jobid()] = std::move(*raw);
  while (keys_.size() > kMaxKeys) keys_.erase(keys_.begin());
  return {};
}

const std::string* JobKeys::find(uint64_t jobid) const {
  auto it = keys_.find(jobid);
  return it == keys_.end() ? nullptr : &it->second;
}

}  // namespace corral::node
