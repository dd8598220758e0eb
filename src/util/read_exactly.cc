#include "util/read_exactly.h"

#include <unistd.h>

#include <cerrno>

namespace corral {

bool read_exactly(int fd, std::string& out, size_t n) {
  size_t have = out.size();
  out.resize(have + n);
  while (n > 0) {
    ssize_t got = ::read(fd, out.data() + have, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got == 0) errno = EIO;
      out.resize(have);
      return false;
    }
    have += static_cast<size_t>(got);
    n -= static_cast<size_t>(got);
  }
  return true;
}

}  // namespace corral
