// corral-dws-emu: a Kubernetes API server with HPE's Data Workflow Services (and the NNF
// Rabbit driver) behind it, for machines without Kubernetes (docs/admin.md, "The DWS
// emulator").
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "api_server.h"
#include "rabbit_inventory.h"
#include "storage/dws/directive_rules.h"
#include "storage/dws/yaml_json.h"

namespace {

using namespace corral::emu::dws;
using nlohmann::json;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool write_private(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  unlink(tmp.c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = close(fd) == 0 && ok;
  return ok && std::rename(tmp.c_str(), path.c_str()) == 0;
}

std::string base64(const std::string& in) {
  static constexpr char kTable[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s : {18, 12, 6, 0}) out += kTable[(v >> s) & 63];
  }
  if (i < in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    if (i + 1 < in.size()) v |= uint8_t(in[i + 1]) << 8;
    out += kTable[(v >> 18) & 63];
    out += kTable[(v >> 12) & 63];
    out += i + 1 < in.size() ? kTable[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// A self-signed certificate for 127.0.0.1/localhost (clients such as kubectl send a bearer
// token only over TLS); kept in `dir` so a restarted emulator keeps its identity.
bool ensure_certificate(const std::string& dir, std::string& cert, std::string& key) {
  cert = dir + "/tls.crt";
  key = dir + "/tls.key";
  if (access(cert.c_str(), R_OK) == 0 && access(key.c_str(), R_OK) == 0) return true;
  std::string cmd = fmt::format(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 -subj /CN=corral-dws-emu "
      "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout '{}' -out '{}' >/dev/null 2>&1",
      key, cert);
  return std::system(cmd.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"corral-dws-emu: a Kubernetes API server with Data Workflow Services behind it (an emulator)"};
  std::string crd_dir, ruleset, listen = "127.0.0.1:0", state_dir, token_file, kubeconfig_out, mapping, rabbits,
                                mount_root, faults_file, tls_dir, version = "v1alpha7";
  std::vector<std::string> global_fs;
  uint64_t capacity = 39582418599936ULL;
  uint64_t padding = 300ULL << 20;
  size_t history = 200000;
  app.add_option("--crd-dir", crd_dir, "directory of the DWS CustomResourceDefinition YAML files")->required();
  app.add_option("--ruleset", ruleset, "YAML file with the DWDirectiveRule (NNF's nnf-ruleset.yaml)")->required();
  app.add_option("--listen", listen, "HOST:PORT to serve on (port 0: any free port)")->capture_default_str();
  app.add_option("--state-dir", state_dir, "keep the objects here, so they survive a restart");
  app.add_option("--token-file", token_file, "require this bearer token from every client");
  app.add_option("--tls-dir", tls_dir,
                 "serve HTTPS with the certificate here (made when missing); default: the state dir");
  app.add_option("--kubeconfig-out", kubeconfig_out, "write a kubeconfig for this server (and the token) here");
  app.add_option("--rabbit-mapping", mapping, "rabbits and their computes, in flux-rabbitmapping's JSON format");
  app.add_option("--rabbits", rabbits, "rabbits and their computes: 'rabbit0=node[0-3];rabbit1=node[4-7]'");
  app.add_option("--capacity", capacity, "bytes of flash per rabbit (with --rabbits)")->capture_default_str();
  app.add_option("--mount-root", mount_root, "directory holding each file system and its compute mount point")
      ->required();
  app.add_option("--global-fs", global_fs, "a directory copy_in/copy_out may use (repeatable; default /)");
  app.add_option("--padding", padding, "bytes NNF adds to each allocation")->capture_default_str();
  app.add_option("--faults", faults_file, "faults to apply from the start (JSON, as POST /emu/v1/faults)");
  app.add_option("--history", history, "changes kept for watches to resume from")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (tls_dir.empty()) tls_dir = state_dir;

  auto catalog = CrdCatalog::load(crd_dir, version);
  if (!catalog) return fmt::print(stderr, "corral-dws-emu: {}\n", catalog.error().message), 2;
  auto rules = corral::storage::dws::DirectiveRules::load_file(ruleset);
  if (!rules) return fmt::print(stderr, "corral-dws-emu: {}\n", rules.error().message), 2;
  auto inventory =
      mapping.empty() ? RabbitInventory::parse_spec(rabbits, capacity) : RabbitInventory::load_mapping(mapping);
  if (!inventory) return fmt::print(stderr, "corral-dws-emu: {}\n", inventory.error().message), 2;

  ObjectStore store(*catalog, state_dir.empty() ? "" : state_dir + "/objects.jsonl", history);
  if (auto st = store.load(); !st) return fmt::print(stderr, "corral-dws-emu: {}\n", st.message()), 1;
  if (auto st = seed_objects(store, *catalog, *inventory, ruleset); !st)
    return fmt::print(stderr, "corral-dws-emu: {}\n", st.message()), 1;

  FaultTable faults;
  if (!faults_file.empty()) {
    json doc = json::parse(read_file(faults_file), nullptr, false);
    if (auto st = faults.set(doc); !st)
      return fmt::print(stderr, "corral-dws-emu: {}: {}\n", faults_file, st.message()), 2;
  }
  DriverConfig dcfg{mount_root, padding, global_fs.empty() ? std::vector<std::string>{"/"} : global_fs};
  NnfDriver driver(store, *catalog, faults, dcfg);
  WorkflowAdmission admission(*rules);
  ApiConfig acfg;
  if (!token_file.empty()) acfg.token = read_file(token_file);
  if (!tls_dir.empty() && !ensure_certificate(tls_dir, acfg.tls_cert, acfg.tls_key))
    return fmt::print(stderr, "corral-dws-emu: cannot make a TLS certificate in {} (is openssl installed?)\n", tls_dir),
           1;
  ApiServer server(store, *catalog, admission, faults, driver, acfg);

  auto colon = listen.rfind(':');
  std::string host = listen.substr(0, colon);
  int port = server.bind(host, std::stoi(listen.substr(colon + 1)));
  if (port < 0) return fmt::print(stderr, "corral-dws-emu: cannot listen on {}\n", listen), 1;
  std::string url = fmt::format("{}://{}:{}", tls_dir.empty() ? "http" : "https", host, port);
  std::string ca_line =
      tls_dir.empty() ? "" : "    certificate-authority-data: " + base64(read_file(acfg.tls_cert) + "\n") + "\n";
  if (!kubeconfig_out.empty()) {
    std::string kc = fmt::format(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: corral-dws-emu\n  cluster:\n    server: {}\n{}"
        "contexts:\n- name: corral-dws-emu\n  context:\n    cluster: corral-dws-emu\n    user: corral\n    namespace: "
        "default\n"
        "current-context: corral-dws-emu\nusers:\n- name: corral\n  user:\n    token: \"{}\"\n",
        url, ca_line, acfg.token);
    if (!write_private(kubeconfig_out, kc))
      return fmt::print(stderr, "corral-dws-emu: cannot write {}\n", kubeconfig_out), 1;
  }

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  driver.start();
  std::thread serving([&] { server.serve(); });
  fmt::print("corral-dws-emu: serving {} on {}\n", catalog->group() + "/" + version, url);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  // Every write is already in the journal. Idle keep-alive connections would hold the
  // server's threads for a minute, so the process ends here instead of joining them.
  store.flush();
  serving.detach();
  std::_Exit(0);
}
