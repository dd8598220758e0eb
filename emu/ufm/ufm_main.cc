// corral-ufm-emu: NVIDIA UFM's REST interface for partition keys and ports, for machines
// without a fabric (docs/admin.md, "The UFM emulator").
#include <csignal>
#include <cstdio>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "fabric/infiniband/pci_names.h"
#include "ufm_server.h"
#include "util/stop_signals.h"

int main(int argc, char** argv) {
  using namespace corral::emu::ufm;
  CLI::App app{
      "corral-ufm-emu: NVIDIA UFM's REST interface (partition keys, ports) as an emulator, with faults an "
      "operator sets through POST /emu/v1/faults"};
  UfmConfig cfg;
  cfg.pci_ids = corral::fabric::infiniband::kDefaultPciIds;
  std::string listen = "127.0.0.1:0", credentials, port_file;
  app.add_option("--listen", listen, "HOST:PORT to serve on (port 0: any free port)")->capture_default_str();
  app.add_option("--credentials", credentials,
                 "file with user:password that clients must send (Basic authentication); none: no check");
  app.add_option("--sysfs", cfg.sysfs, "the test cluster's sysfs trees (DIR/NODE), listed as UFM's ports");
  app.add_option("--pci-ids", cfg.pci_ids, "PCI ID database")->capture_default_str();
  app.add_option("--port-file", port_file, "write the port served on here once listening");
  CLI11_PARSE(app, argc, argv);

  if (!credentials.empty()) {
    std::ifstream in(credentials);
    std::string line;
    std::getline(in, line);
    const auto colon = line.find(':');
    if (colon == std::string::npos)
      return fmt::print(stderr, "corral-ufm-emu: {}: want user:password\n", credentials), 2;
    cfg.user = line.substr(0, colon);
    cfg.password = line.substr(colon + 1);
  }
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) return fmt::print(stderr, "corral-ufm-emu: --listen wants HOST:PORT\n"), 2;
  corral::block_stop_signals();  // before any thread: the signal comes to wait_for_stop_signal
  UfmServer server(cfg);
  const int port = server.bind(listen.substr(0, colon), std::atoi(listen.c_str() + colon + 1));
  if (port < 0) return fmt::print(stderr, "corral-ufm-emu: cannot listen on {}\n", listen), 1;
  if (!port_file.empty()) std::ofstream(port_file) << port << "\n";
  fmt::print("corral-ufm-emu: serving http://{}:{}\n", listen.substr(0, colon), port);
  std::fflush(stdout);
  std::thread serving([&server] { server.serve(); });
  corral::wait_for_stop_signal();
  server.stop();
  serving.join();
  return 0;
}
