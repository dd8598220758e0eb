// corral-dws-clientmountd: the emulated nnf-clientmount of one or more compute nodes
// (clientmount_daemon.h; docs/admin.md "The DWS emulator").
#include <csignal>
#include <cstdio>
#include <set>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "clientmount_daemon.h"
#include "storage/dws/kube_config.h"
#include "util/hostlist.h"

int main(int argc, char** argv) {
  using namespace corral;
  std::string kubeconfig, nodes, version = "v1alpha7";
  CLI::App app{"corral-dws-clientmountd: carries out the ClientMounts of compute nodes (an emulated nnf-clientmount)"};
  app.add_option("--kubeconfig", kubeconfig, "The API server's kubeconfig (corral-dws-emu --kubeconfig-out)")
      ->required();
  app.add_option("--nodes", nodes, "The compute nodes this daemon mounts for (a hostlist)")->required();
  app.add_option("--dws-api-version", version, "Version of dataworkflowservices.github.io")->default_val(version);
  CLI11_PARSE(app, argc, argv);
  auto kc = storage::dws::load_kubeconfig(kubeconfig);
  if (!kc) {
    fmt::print(stderr, "corral-dws-clientmountd: {}\n", kc.message());
    return 2;
  }
  auto hl = Hostlist::parse(nodes);
  if (!hl || hl->empty()) {
    fmt::print(stderr, "corral-dws-clientmountd: --nodes '{}' is not a hostlist\n", nodes);
    return 2;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  const auto& hosts = hl->hosts();
  emu::dws::ClientMountDaemon daemon(std::make_shared<const storage::dws::KubeConfig>(std::move(*kc)),
                                     std::set<std::string>(hosts.begin(), hosts.end()), version);
  daemon.start();
  int sig = 0;
  sigwait(&set, &sig);
  daemon.stop();
  return 0;
}
