#include "storage/dws/rabbit_config.h"

#include <algorithm>

#include <fmt/format.h>

namespace corral::storage::dws {
namespace {

Status apply(RabbitConfig& c, hook::Setting s) {
  std::replace(s.key.begin(), s.key.end(), '_', '-');
  const std::string& k = s.key;
  if (k == "enabled") return hook::read_bool(s, c.enabled);
  if (k == "kubeconfig") return hook::read_string(s, c.kubeconfig);
  if (k == "server") return hook::read_string(s, c.server);
  if (k == "token-file") return hook::read_string(s, c.token_file);
  if (k == "ca-file") return hook::read_string(s, c.ca_file);
  if (k == "namespace") return hook::read_string(s, c.ns);
  if (k == "dws-api-version") return hook::read_string(s, c.api_version);
  if (k == "workflow-prefix") return hook::read_string(s, c.prefix);
  if (k == "tc-timeout") return hook::read_duration(s, c.tc_timeout);
  if (k == "setup-timeout") return hook::read_duration(s, c.setup_timeout);
  if (k == "prerun-timeout") return hook::read_duration(s, c.prerun_timeout);
  if (k == "postrun-timeout") return hook::read_duration(s, c.postrun_timeout);
  if (k == "teardown-after") return hook::read_duration(s, c.teardown_after);
  if (k == "epilog-timeout") return hook::read_duration(s, c.epilog_timeout);
  if (k == "min-allocation-size") return hook::read_uint(s, c.min_allocation_gib, 1 << 20);
  if (k == "writers") return hook::read_uint(s, c.writers, 64);
  if (k == "max-directives") return hook::read_uint(s, c.max_directives, 1024);
  return hook::unknown_key(s);
}

// Kubernetes names: what a prefix, namespace or version may hold.
bool dns_label_chars(const std::string& s) {
  return !s.empty() && s.size() <= 40 && std::all_of(s.begin(), s.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
  });
}

}  // namespace

Result<RabbitConfig> parse_rabbit_settings(const hook::Settings& settings) {
  RabbitConfig c;
  for (const auto& s : settings)
    if (auto st = apply(c, s); !st) return st.error();
  if (!dns_label_chars(c.ns) || !dns_label_chars(c.prefix) || !dns_label_chars(c.api_version))
    return invalid("rabbit: namespace, workflow-prefix and dws-api-version must be lower-case letters, digits and '-'");
  if (c.writers == 0) return invalid("rabbit.writers: at least 1");
  if (c.enabled && c.kubeconfig.empty() && c.server.empty())
    return invalid("rabbit: set kubeconfig (a kubeconfig file) or server (with token-file and ca-file)");
  return c;
}

Result<KubeConfig> rabbit_kube_config(const RabbitConfig& c) {
  if (!c.kubeconfig.empty()) return load_kubeconfig(c.kubeconfig);
  KubeConfig kc;
  kc.server = c.server;
  if (!c.token_file.empty()) {
    auto tok = read_small_file(c.token_file, 16 << 10);
    if (!tok) return invalid("rabbit.token-file: " + tok.message());
    kc.token = *tok;
    while (!kc.token.empty() && std::isspace(static_cast<unsigned char>(kc.token.back()))) kc.token.pop_back();
  }
  if (!c.ca_file.empty()) {
    auto pem = read_small_file(c.ca_file, 1 << 20);
    if (!pem) return invalid("rabbit.ca-file: " + pem.message());
    kc.ca_pem = *pem;
  }
  return kc;
}

}  // namespace corral::storage::dws
