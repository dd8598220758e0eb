#include "storage/dws/kube_config.h"

#include <openssl/evp.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "storage/dws/yaml_json.h"

namespace corral::storage::dws {
namespace {

using nlohmann::json;

constexpr size_t kMaxKubeconfig = 1 << 20;
constexpr size_t kMaxToken = 16 << 10;
constexpr size_t kMaxCa = 1 << 20;

Result<std::string> base64_decode(const std::string& text) {
  std::string in;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) in += c;
  if (in.size() % 4 != 0) return invalid("not base64 (length is not a multiple of 4)");
  std::string out(in.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  if (n < 0) return invalid("not base64");
  size_t pad = 0;
  for (size_t i = in.size(); i > 0 && in[i - 1] == '=' && pad < 2; --i) ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

// An entry of a kubeconfig list ("clusters", "users", "contexts") by name.
const json* named(const json& doc, const char* list, const std::string& name, const char* field) {
  if (!doc.contains(list) || !doc[list].is_array()) return nullptr;
  for (const auto& e : doc[list])
    if (e.is_object() && e.value("name", "") == name && e.contains(field) && e[field].is_object()) return &e[field];
  return nullptr;
}

std::string relative_to(const std::string& file, const std::string& kubeconfig) {
  std::filesystem::path p(file);
  if (p.is_absolute()) return file;
  return (std::filesystem::path(kubeconfig).parent_path() / p).string();
}

}  // namespace

Result<std::string> read_small_file(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > max_bytes) return invalid(fmt::format("'{}' is larger than {} bytes", path, max_bytes));
  return text;
}

Result<KubeConfig> load_kubeconfig(const std::string& path) {
  auto text = read_small_file(path, kMaxKubeconfig);
  if (!text) return text.error();
  auto docs = yaml_documents(*text);
  if (!docs) return invalid(fmt::format("kubeconfig '{}': {}", path, docs.message()));
  if (docs->empty() || !(*docs)[0].is_object()) return invalid(fmt::format("kubeconfig '{}' is empty", path));
  const json& doc = (*docs)[0];
  auto bad = [&](const std::string& why) { return invalid(fmt::format("kubeconfig '{}': {}", path, why)); };
  std::string ctx_name = doc.value("current-context", "");
  if (ctx_name.empty()) return bad("no current-context");
  const json* ctx = named(doc, "contexts", ctx_name, "context");
  if (!ctx) return bad("context '" + ctx_name + "' is not defined");
  const json* cluster = named(doc, "clusters", ctx->value("cluster", ""), "cluster");
  if (!cluster) return bad("the cluster of context '" + ctx_name + "' is not defined");
  KubeConfig kc;
  kc.server = cluster->value("server", "");
  if (kc.server.rfind("https://", 0) != 0 && kc.server.rfind("http://", 0) != 0)
    return bad("the cluster's server '" + kc.server + "' is not an http(s) URL");
  while (!kc.server.empty() && kc.server.back() == '/') kc.server.pop_back();
  kc.insecure = cluster->value("insecure-skip-tls-verify", false);
  if (cluster->contains("certificate-authority-data")) {
    auto pem = base64_decode(cluster->value("certificate-authority-data", ""));
    if (!pem) return bad("certificate-authority-data: " + pem.message());
    kc.ca_pem = std::move(*pem);
  } else if (cluster->contains("certificate-authority")) {
    auto pem = read_small_file(relative_to(cluster->value("certificate-authority", ""), path), kMaxCa);
    if (!pem) return bad(pem.message());
    kc.ca_pem = std::move(*pem);
  }
  const std::string user_name = ctx->value("user", "");
  if (!user_name.empty()) {
    const json* user = named(doc, "users", user_name, "user");
    if (!user) return bad("user '" + user_name + "' is not defined");
    if (user->contains("client-certificate") || user->contains("client-certificate-data") || user->contains("exec") ||
        user->contains("auth-provider"))
      return bad("user '" + user_name + "': only token authentication (token or tokenFile) is supported");
    if (user->contains("token")) {
      kc.token = user->value("token", "");
    } else if (user->contains("tokenFile")) {
      auto tok = read_small_file(relative_to(user->value("tokenFile", ""), path), kMaxToken);
      if (!tok) return bad(tok.message());
      kc.token = std::move(*tok);
    }
  }
  while (!kc.token.empty() && std::isspace(static_cast<unsigned char>(kc.token.back()))) kc.token.pop_back();
  return kc;
}

}  // namespace corral::storage::dws
