#include "ctld/cluster_key.h"

#include <spdlog/spdlog.h>

#include "ctld/controller.h"
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

Status Controller::load_cluster_key() {
  auto key = load_or_create_key_file(cfg_.key_file);
  if (!key) return Error{key.error().code, "controller.key-file: " + key.message()};
  cluster_key_ = std::move(*key);
  return {};
}

}  // namespace corral::ctld
