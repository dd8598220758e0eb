// The spool directory of a cray-pals step (or job) on one node: BASE/NAME, the user's own
// (0700), where the agent puts the apinfo file and Cray PMI keeps what it needs while the
// step runs. BASE is the agent's (STATE_DIR/pals, 0711). The agent, as root, creates
// the directory and the file before handing them to the user, never after, so no path a
// user could have placed is ever followed; removal walks the tree by descriptor without
// following links and stops after a bounded number of entries.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "util/result.h"

namespace corral::node::pals {

class PalsSpool {
 public:
  // `name` is one path component the agent made (digits, letters, '.', '-'). A directory
  // left by an agent that died is removed first.
  static Result<std::unique_ptr<PalsSpool>> create(const std::string& base, const std::string& name, uid_t uid,
                                                   gid_t gid, const std::string& apinfo);
  // What create() makes; nothing on disk until then.
  PalsSpool(std::string base, std::string name)
      : base_(std::move(base)), name_(std::move(name)), dir_(base_ + "/" + name_) {}
  ~PalsSpool();
  PalsSpool(const PalsSpool&) = delete;
  PalsSpool& operator=(const PalsSpool&) = delete;

  const std::string& dir() const { return dir_; }
  std::string apinfo_path() const { return dir_ + "/apinfo"; }

 private:
  std::string base_, name_, dir_;
};

// Removes BASE/NAME and what is in it, by descriptor, never following a link; false (and
// the rest left in place) after `max_entries` entries or 16 levels.
bool remove_tree(const std::string& base, const std::string& name, std::size_t max_entries = 100000);

}  // namespace corral::node::pals
