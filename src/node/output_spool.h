// Task output the controller has not received, kept on disk while the agent cannot reach
// it (and across an agent restart) and handed back for the next registration, so that a
// cut link delays output instead of losing it. Bounded: past the limit, output is counted
// and dropped, and the job gets a line on stderr that says how much was lost.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common.pb.h"
#include "util/result.h"
#include "util/unique_fd.h"

namespace corral::node {

namespace v1 = ::corral::v1;

class OutputSpool {
 public:
  static constexpr uint64_t kDefaultMaxBytes = 16u << 20;  // a fraction of one agent message

  // Opens (creating, private) `path`; what a previous agent process left there is kept
  // for take().
  static Result<OutputSpool> open(const std::string& path, uint64_t max_bytes);

  // Each entry is kept with the incarnation of the process that numbered it (its seq).
  void keep(const v1::TaskOutput& out, const std::string& incarnation);
  // Everything kept, oldest first, then a note per job whose output was dropped. It stays
  // kept until clear(): a registration that carried it may be lost with the link.
  std::vector<v1::TaskOutput> read() const;
  void clear();
  uint64_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0 && lost_.empty(); }

 private:
  struct Lost {
    uint32_t rank = 0;
    std::string node;
    uint64_t bytes = 0;
  };
  OutputSpool(UniqueFd fd, uint64_t max_bytes) : fd_(std::move(fd)), max_(max_bytes) {}
  std::string read_all() const;

  UniqueFd fd_;
  uint64_t max_ = kDefaultMaxBytes;
  uint64_t bytes_ = 0;
  std::map<uint64_t, Lost> lost_;  // by job id
};

}  // namespace corral::node
