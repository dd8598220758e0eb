// The simulated NIC: a CxiDevice for machines without Slingshot hardware (tests, the demo
// and development clusters). One node's NICs and services live in STATE_DIR/NODE.json so
// they outlive the node agent; every operation holds an exclusive flock on STATE_DIR/
// NODE.lock and rewrites the file atomically, so concurrent corral-slingshot processes
// and agent restarts see one consistent NIC. It enforces what the cxi driver does:
// reservations within capacity, at most 4 VNIs, and (through use()) that only members
// use a service, only with its VNIs and traffic classes.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "fabric/slingshot/cxi_device.h"
#include "fabric/slingshot/sim_cxi_config.h"

namespace corral::fabric::slingshot {

class SimCxiDevice final : public CxiDevice {
 public:
  using Clock = std::function<double()>;  // seconds since the epoch (tests may fake it)

  // Creates STATE_DIR when needed. The node's state itself is made on first use, with the
  // configuration's system services.
  static Result<std::unique_ptr<SimCxiDevice>> create(std::string state_dir, std::string node, SimConfig config,
                                                      Clock clock = {});

  Result<std::vector<Nic>> list() override;
  Result<uint32_t> alloc_service(const std::string& nic, const ServiceDesc& desc) override;
  Status destroy_service(const std::string& nic, uint32_t svc_id) override;

  // What the driver checks when a process of `uid` allocates a logical network interface
  // against service `svc_id` and a communication profile for `vni` and `tc` (one
  // TrafficClass bit). permission_denied names the rule broken.
  Status use(const std::string& nic, uint32_t svc_id, uint16_t vni, uint32_t tc, uint32_t uid);

  const std::string& state_file() const { return state_file_; }

 private:
  struct Key {};  // only create() constructs, after validating its arguments

 public:
  SimCxiDevice(Key, std::string state_dir, std::string node, SimConfig config, Clock clock);

 private:
  std::string node_;
  std::string state_file_;
  std::string lock_file_;
  SimConfig config_;
  Clock clock_;
};

}  // namespace corral::fabric::slingshot
