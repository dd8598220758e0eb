// A one-line status ("corral: job 12 pending (Resources) 3.1s") redrawn in place on a
// terminal and erased before anything else is printed. Silent when stderr isn't a tty,
// so scripts and logs never see it.
#pragma once

#include <mutex>
#include <string_view>

namespace corral::cli {

class ProgressLine {
 public:
  explicit ProgressLine(int fd = 2);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return enabled_; }
  void show(std::string_view text);
  void clear();

 private:
  void clear_locked();
  int fd_;
  bool enabled_;
  bool shown_ = false;
  std::mutex mu_;
};

}  // namespace corral::cli
