// Reading a known number of bytes from a descriptor: read(2) may return part of them, or be
// interrupted.
#pragma once

#include <cstddef>
#include <string>

namespace corral {

// Appends exactly `n` bytes read from `fd` to `out`, retrying short reads and EINTR. False
// at end of file, on an error or on a timeout (SO_RCVTIMEO), errno set.
bool read_exactly(int fd, std::string& out, size_t n);

}  // namespace corral
