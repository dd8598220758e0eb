#include "fabric/infiniband/subnet_manager.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "fabric/infiniband/opensm_partitions.h"
#include "fabric/infiniband/ufm_subnet_manager.h"
#include "util/read_exactly.h"
#include "util/unique_fd.h"

namespace corral::fabric::infiniband {
namespace {

constexpr size_t kMaxConfigFile = 1 << 20;

// A root-owned file of the site's (credentials, base lines): read whole, bounded.
Result<std::string> read_site_file(const std::string& path, const char* key, bool secret) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0)
    return invalid(fmt::format("infiniband.{} = \"{}\": {}", key, path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode) || st.st_size > static_cast<off_t>(kMaxConfigFile))
    return invalid(fmt::format("infiniband.{} = \"{}\": not a regular file of at most 1 MiB", key, path));
  if (secret && (st.st_mode & 077) != 0)
    return invalid(fmt::format("infiniband.{} = \"{}\": others may read it (chmod 600)", key, path));
  std::string text;
  if (st.st_size > 0 && !read_exactly(fd.get(), text, static_cast<size_t>(st.st_size)))
    return invalid(fmt::format("infiniband.{} = \"{}\": cannot read it", key, path));
  return text;
}

}  // namespace

std::string ufm_pkey(uint16_t pkey) { return fmt::format("{:#x}", pkey); }

Result<std::unique_ptr<SubnetManager>> make_subnet_manager(const IbConfig& cfg) {
  if (cfg.subnet_manager == "ufm") {
    auto cred = read_site_file(cfg.ufm_credentials, "ufm-credentials", true);
    if (!cred) return cred.error();
    while (!cred->empty() && (cred->back() == '\n' || cred->back() == '\r')) cred->pop_back();
    if (cred->find(':') == std::string::npos || cred->find('\n') != std::string::npos)
      return invalid(
          fmt::format("infiniband.ufm-credentials = \"{}\": want one line, user:password", cfg.ufm_credentials));
    if (!cfg.ufm_url.starts_with("https://") && !cfg.ufm_url.starts_with("http://"))
      return invalid(fmt::format("infiniband.ufm-url = \"{}\": want an http:// or https:// URL", cfg.ufm_url));
    http::HttpOptions opts{cfg.ufm_url, *cred, cfg.ufm_ca};
    return std::unique_ptr<SubnetManager>(std::make_unique<UfmSubnetManager>(std::move(opts)));
  }
  if (cfg.subnet_manager == "opensm") {
    std::string base;
    if (!cfg.opensm_base.empty()) {
      auto text = read_site_file(cfg.opensm_base, "opensm-base", false);
      if (!text) return text.error();
      base = std::move(*text);
    }
    std::map<uint16_t, std::string> names;
    for (const auto& p : cfg.partitions) names[p.pkey] = p.name;
    return std::unique_ptr<SubnetManager>(
        std::make_unique<OpenSmPartitions>(cfg.opensm_partitions, cfg.opensm_reload, base, std::move(names)));
  }
  return std::unique_ptr<SubnetManager>();
}

}  // namespace corral::fabric::infiniband
