#include "net/tls.h"

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <fstream>
#include <sstream>

#include "net/grpc_credential.h"

namespace corral::net {

namespace {

constexpr size_t kMaxPemBytes = 1u << 20;

Result<std::string> read_pem(const std::string& path, std::string_view setting) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(std::string(setting) + ": cannot read '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  std::string pem = s.str();
  if (pem.size() > kMaxPemBytes || pem.find("-----BEGIN ") == std::string::npos)
    return invalid(std::string(setting) + ": '" + path + "' is not a PEM file");
  return pem;
}

}  // namespace

Result<std::shared_ptr<grpc::ServerCredentials>> server_credentials(const TlsServerFiles& files,
                                                                    std::string_view setting) {
  if (!files.enabled()) return grpc::InsecureServerCredentials();
  if (files.cert.empty() || files.key.empty())
    return invalid(std::string(setting) + ": TLS needs both a certificate and its key");
  auto cert = read_pem(files.cert, setting);
  if (!cert) return cert.error();
  auto key = read_pem(files.key, setting);
  if (!key) return key.error();
  grpc::SslServerCredentialsOptions opts;
  opts.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(opts);
}

Result<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials(const std::string& ca_file,
                                                                      std::string_view target) {
  if (ca_file.empty() || !over_network(target)) return grpc::InsecureChannelCredentials();
  auto ca = read_pem(ca_file, "the TLS CA");
  if (!ca) return ca.error();
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = *ca;
  return grpc::SslCredentials(opts);
}

}  // namespace corral::net
