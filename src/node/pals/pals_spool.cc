#include "node/pals/pals_spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "util/unique_fd.h"
#include "util/write_all.h"

namespace corral::node::pals {

namespace {

constexpr int kMaxDepth = 16;

std::string errno_text() { return std::strerror(errno); }

bool one_component(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) return false;
  return true;
}

// Empties the directory `fd` refers to, then removes `name` from `parent`.
bool remove_at(int parent, const char* name, int depth, std::size_t& budget) {
  UniqueFd fd(::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return errno == ENOENT || ::unlinkat(parent, name, 0) == 0;
  int listing = ::dup(fd.get());
  DIR* dir = listing >= 0 ? ::fdopendir(listing) : nullptr;
  if (dir == nullptr) {
    if (listing >= 0) ::close(listing);
    return false;
  }
  bool ok = true;
  while (dirent* e = ::readdir(dir)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    if (budget == 0) {
      ok = false;
      break;
    }
    --budget;
    if (::unlinkat(fd.get(), e->d_name, 0) == 0) continue;
    if (errno != EISDIR || depth >= kMaxDepth || !remove_at(fd.get(), e->d_name, depth + 1, budget)) {
      ok = false;
      break;
    }
  }
  ::closedir(dir);
  return ok && ::unlinkat(parent, name, AT_REMOVEDIR) == 0;
}

// BASE: the agent's, made if missing; anything else there is refused.
Result<UniqueFd> open_base(const std::string& base) {
  if (::mkdir(base.c_str(), 0711) != 0 && errno != EEXIST)
    return io_error("cannot make " + base + " for cray-pals: " + errno_text());
  UniqueFd fd(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid())
    return io_error(base + " is not a directory of the agent's own: cray-pals keeps its spool directories there");
  if ((st.st_mode & 07777) != 0711 && ::fchmod(fd.get(), 0711) != 0)
    return io_error("cannot set the mode of " + base + ": " + errno_text());
  return fd;
}

}  // namespace

bool remove_tree(const std::string& base, const std::string& name, std::size_t max_entries) {
  if (!one_component(name)) return false;
  UniqueFd parent(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!parent.valid()) return errno == ENOENT;
  std::size_t budget = max_entries;
  return remove_at(parent.get(), name.c_str(), 0, budget);
}

Result<std::unique_ptr<PalsSpool>> PalsSpool::create(const std::string& base, const std::string& name, uid_t uid,
                                                     gid_t gid, const std::string& apinfo) {
  if (!one_component(name)) return invalid("cray-pals: '" + name + "' is not a spool directory name");
  auto parent = open_base(base);
  if (!parent) return parent.error();
  if (!remove_tree(base, name)) return io_error("cannot remove the stale " + base + "/" + name);
  if (::mkdirat(parent->get(), name.c_str(), 0700) != 0)
    return io_error("cannot make " + base + "/" + name + ": " + errno_text());
  auto spool = std::make_unique<PalsSpool>(base, name);
  UniqueFd dir(::openat(parent->get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid()) return io_error("cannot open " + spool->dir_ + ": " + errno_text());
  UniqueFd file(::openat(dir.get(), "apinfo", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!file.valid()) return io_error("cannot create " + spool->apinfo_path() + ": " + errno_text());
  if (!write_all(file.get(), apinfo))
    return io_error("cannot write " + spool->apinfo_path() + ": " + errno_text());
  // Handed over only now that it holds everything the agent puts there.
  const bool own = uid == ::geteuid();
  if (!own && (::fchown(file.get(), uid, gid) != 0 || ::fchown(dir.get(), uid, gid) != 0))
    return io_error("cannot give " + spool->dir_ + " to uid " + std::to_string(uid) + ": " + errno_text());
  return spool;
}

PalsSpool::~PalsSpool() {
  if (!remove_tree(base_, name_)) spdlog::warn("cray-pals: could not remove all of {} (left in place)", dir_);
}

}  // namespace corral::node::pals
