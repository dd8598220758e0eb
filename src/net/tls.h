// Optional TLS on corral's network connections: confidentiality, and the server's identity
// checked against the site's CA. Who the caller is stays MUNGE's job (net/grpc_credential.h);
// TLS adds that nobody on the wire reads or changes what passes. Unix sockets never use it.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "util/result.h"

namespace grpc {
class ChannelCredentials;
class ServerCredentials;
}  // namespace grpc

namespace corral::net {

// A server's certificate chain and private key (PEM files). Both empty: plaintext.
struct TlsServerFiles {
  std::string cert;
  std::string key;
  bool enabled() const { return !cert.empty() || !key.empty(); }
};

// TLS with the files when enabled, else plaintext. Errors name the file and the setting.
Result<std::shared_ptr<grpc::ServerCredentials>> server_credentials(const TlsServerFiles& files,
                                                                    std::string_view setting);

// For a channel to `target`: TLS that trusts only the CA certificate(s) in `ca_file`
// when it is set and the target is on the network; plaintext otherwise.
Result<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials(const std::string& ca_file,
                                                                      std::string_view target);

}  // namespace corral::net
