// Where and how corral reaches a Kubernetes API server: the server's URL, the CA that signs
// its certificate, and the bearer token. Read from a kubeconfig file (its current context)
// or given one by one in [rabbit] (server, token-file, ca-file).
#pragma once

#include <string>

#include "util/result.h"

namespace corral::storage::dws {

struct KubeConfig {
  std::string server;     // "https://127.0.0.1:6443"
  std::string ca_pem;     // the CA certificate(s), PEM; empty: the system's trust store
  std::string token;      // bearer token; empty: none
  bool insecure = false;  // the kubeconfig's insecure-skip-tls-verify
};

// The current context's cluster and user of a kubeconfig: `server`,
// `certificate-authority-data` or `certificate-authority`, `token` or `tokenFile`. Client
// certificates and exec plugins are refused with a message saying so.
Result<KubeConfig> load_kubeconfig(const std::string& path);

// A token or CA file's contents (surrounding whitespace trimmed for tokens); errors name it.
Result<std::string> read_small_file(const std::string& path, size_t max_bytes);

}  // namespace corral::storage::dws
