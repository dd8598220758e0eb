#include "ctld/cluster_key.h"

#include <spdlog/spdlog.h>

#include "job/hmac_key.h"

namespace corral::ctld {

Result<std::string> load_or_create_key_file(const std::string& path) {
  auto key = job::load_key_file(path);
  if (key || key.error().code != Errc::not_found) return key;
  auto fresh = job::generate_key();
  if (!fresh) return fresh.error();
  auto st = job::write_key_file(path, *fresh);
  // Another corrald (or `corral start`) may have written it meanwhile: use theirs.
  if (!st.ok() && st.error().code == Errc::already_exists) return job::load_key_file(path);
  if (!st.ok()) return st.error();
  spdlog::info("created the cluster key {}", path);
  return fresh;
}

}  // namespace corral::ctld
