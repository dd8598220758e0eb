#include "net/credentials.h"

#include <cstdlib>

#include "net/cluster_key_auth.h"
#include "net/munge_cred.h"

namespace corral::net {

Result<std::unique_ptr<Credentials>> make_credentials(const AuthConfig& config) {
  if (config.method == AuthMethod::munge) return munge_credentials(config.munge_socket);
  return cluster_key_credentials(config.key_file, config.authd_socket);
}

Result<AuthConfig> client_auth_config() {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v != nullptr ? v : "");
  };
  AuthConfig config;
  if (const std::string method = env("CORRAL_AUTH"); !method.empty()) {
    auto m = parse_auth_method(method);
    if (!m) return Error{m.error().code, m.message() + " (CORRAL_AUTH)"};
    config.method = *m;
  }
  config.munge_socket = env("CORRAL_MUNGE_SOCKET");
  config.authd_socket = env("CORRAL_AUTH_SOCKET");
  return config;
}

}  // namespace corral::net
