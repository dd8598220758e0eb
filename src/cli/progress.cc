#include "cli/progress.h"
#include "util/write_all.h"

#include <unistd.h>

#include <cerrno>
#include <string>

namespace corral::cli {

ProgressLine::ProgressLine(int fd) : fd_(fd), enabled_(::isatty(fd) == 1) {}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::show(std::string_view text) {
  if (!enabled_) return;
  std::lock_guard lock(mu_);
  std::string line = "\r\033[K";
  line += text;
  write_all(fd_, line);
  shown_ = true;
}

void ProgressLine::clear() {
  std::lock_guard lock(mu_);
  clear_locked();
}

void ProgressLine::clear_locked() {
  if (!shown_) return;
  write_all(fd_, "\r\033[K");
  shown_ = false;
}

}  // namespace corral::cli
