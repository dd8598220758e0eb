#include "node/output_spool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "util/write_all.h"

namespace corral::node {

namespace {

constexpr size_t kHeader = 4;  // little-endian length of the serialized TaskOutput

}  // namespace

Result<OutputSpool> OutputSpool::open(const std::string& path, uint64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return io_error(fmt::format("output spool '{}': {}", path, std::strerror(errno)));
  OutputSpool spool(UniqueFd(fd), max_bytes);
  struct stat st {};
  if (::fstat(fd, &st) == 0) spool.bytes_ = static_cast<uint64_t>(st.st_size);
  return spool;
}

void OutputSpool::keep(const v1::TaskOutput& out, const std::string& incarnation) {
  const uint64_t size = kHeader + out.ByteSizeLong() + incarnation.size() + 8;
  if (bytes_ + size > max_) {
    Lost& l = lost_[out.jobid()];
    if (l.bytes == 0) {
      l.rank = out.rank();
      l.node = out.node();
    }
    l.bytes += out.data().size();
    return;
  }
  v1::TaskOutput rec = out;
  rec.set_incarnation(incarnation);
  std::string body = rec.SerializeAsString();
  const auto n = static_cast<uint32_t>(body.size());
  std::string buf{static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff), static_cast<char>((n >> 16) & 0xff),
                  static_cast<char>((n >> 24) & 0xff)};
  buf += body;
  // A failed write (disk full) loses this entry only; it is counted like one past the limit.
  if (!write_all(fd_.get(), buf)) {
    lost_[out.jobid()].bytes += out.data().size();
    return;
  }
  bytes_ += buf.size();
}

std::string OutputSpool::read_all() const {
  std::string data;
  char buf[65536];
  for (off_t off = 0;;) {
    ssize_t n = ::pread(fd_.get(), buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
    off += n;
  }
  return data;
}

std::vector<v1::TaskOutput> OutputSpool::read() const {
  std::vector<v1::TaskOutput> out;
  const std::string data = bytes_ > 0 ? read_all() : std::string();
  size_t pos = 0;
  // A record cut short (the agent died while writing it) ends the list.
  while (data.size() - pos >= kHeader) {
    const auto* p = reinterpret_cast<const unsigned char*>(data.data() + pos);
    const size_t n = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<size_t>(p[3]) << 24);
    if (data.size() - pos - kHeader < n) break;
    if (!out.emplace_back().ParseFromArray(data.data() + pos + kHeader, static_cast<int>(n))) {
      out.pop_back();
      break;
    }
    pos += kHeader + n;
  }
  for (const auto& [jobid, l] : lost_) {
    auto& note = out.emplace_back();
    note.set_jobid(jobid);
    note.set_rank(l.rank);
    note.set_node(l.node);
    note.set_stderr(true);
    note.set_data(
        fmt::format("corral: {}: {} bytes of this job's output were lost while the controller was "
                    "unreachable (the node keeps at most {} bytes)\n",
                    l.node, l.bytes, max_));
  }
  return out;
}

void OutputSpool::clear() {
  lost_.clear();
  if (bytes_ > 0 && ::ftruncate(fd_.get(), 0) == 0) bytes_ = 0;
}

}  // namespace corral::node
