// The compute nodes' mount daemon, as NNF's nnf-clientmount does it on a real node: it
// watches the ClientMounts of its nodes (namespace = node name) and carries out their
// desiredState. "Mounting" here makes the rabbit file system's directory (under the
// emulator's --mount-root) the job user's, as setPermissions asks, and reports every
// mount mounted and ready; unmounting reports them unmounted. A ClientMount annotated
// emu.corral.dev/fail-mount (the emulator's mount fault) gets status.error instead.
#pragma once

#include <memory>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "storage/dws/kube_watch.h"
#include "storage/dws/kube_writers.h"

namespace corral::emu::dws {

class ClientMountDaemon {
 public:
  ClientMountDaemon(std::shared_ptr<const storage::dws::KubeConfig> kube, std::set<std::string> nodes,
                    std::string api_version);
  void start();
  void stop();

 private:
  void handle(const nlohmann::json& obj);
  nlohmann::json carry_out(const nlohmann::json& obj) const;

  std::shared_ptr<const storage::dws::KubeConfig> kube_;
  std::set<std::string> nodes_;
  std::string base_;
  storage::dws::KubeWriters writers_;
  std::unique_ptr<storage::dws::KubeWatch> watch_;
};

}  // namespace corral::emu::dws
