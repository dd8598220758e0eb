// Writing a whole buffer to a descriptor: write(2) may take part of it, or be interrupted.
#pragma once

#include <string_view>

namespace corral {

// Writes all of `data`, retrying short writes and EINTR. False on failure, errno set.
bool write_all(int fd, std::string_view data);

}  // namespace corral
