#include "node/state_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace corral::node {

Result<UniqueFd> lock_state_dir(const std::string& dir) {
  const std::string path = dir + "/lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return io_error("cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return io_error("cannot lock " + path + ": " + std::strerror(errno));
    char buf[32] = {};
    ssize_t n = ::pread(fd.get(), buf, sizeof buf - 1, 0);
    std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return Error{Errc::already_exists, "state directory " + dir + " is in use by corral-node" +
                                           (holder.empty() ? "" : " pid " + holder) +
                                           ": each agent needs its own --state-dir"};
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd.get(), 0) != 0 || ::pwrite(fd.get(), pid.data(), pid.size(), 0) < 0)
    return io_error("cannot write " + path + ": " + std::strerror(errno));
  return fd;
}

}  // namespace corral::node
