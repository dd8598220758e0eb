// A controller for unit tests: its state in a test's temporary directory, commits not
// synced, started. Tests shape the Config first (test_config, then their own settings).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ctld/agent_link.h"
#include "ctld/controller.h"
#include "job/jobspec.h"
#include "temp_dir.h"

namespace corral::test {

inline ctld::Config test_config(const TempDir& dir) {
  ctld::Config c;
  c.state_dir = dir.str();
  c.key_file = dir.str() + "/cluster.key";
  c.sync_full = false;
  return c;
}

// Null (with a test failure that says why) when the store or the controller cannot start.
inline std::unique_ptr<ctld::Controller> start_test_controller(const TempDir& dir, const ctld::Config& c) {
  auto store = store::Store::open(dir.str() + "/corral.db", {.synchronous_full = false, .commit_interval = 0.002});
  if (!store.ok()) {
    ADD_FAILURE() << store.message();
    return nullptr;
  }
  auto ctl = std::make_unique<ctld::Controller>(c, std::move(*store));
  if (auto st = ctl->start(); !st.ok()) {
    ADD_FAILURE() << st.message();
    return nullptr;
  }
  return ctl;
}

// A fake agent "a" serving one 4-core node, node0, so that jobs fit somewhere (with
// `spooled`: the output it says it still holds). Its link; null, with a test failure, when
// the controller refuses it.
inline std::shared_ptr<ctld::AgentLink> register_one_node(ctld::Controller& ctl, const std::string& incarnation = "1",
                                                          const std::vector<v1::TaskOutput>& spooled = {}) {
  v1::Register reg;
  reg.set_agent_id("a");
  reg.set_incarnation(incarnation);
  auto* n = reg.add_nodes();
  n->set_name("node0");
  n->set_cores(4);
  n->set_memory_mb(1024);
  google::protobuf::RepeatedPtrField<v1::TaskOutput> out(spooled.begin(), spooled.end());
  std::shared_ptr<ctld::AgentLink> link;
  if (auto st = ctl.agent_register(ctld::Caller{0, 0}, reg, nullptr, &link, out); !st.ok()) {
    ADD_FAILURE() << st.message();
    return nullptr;
  }
  return link;
}

// Submits `r` as root: its job id; 0, with a test failure, when it is refused.
inline uint64_t submit_job(ctld::Controller& ctl, const job::JobRequest& r) {
  auto spec = job::build_jobspec(r);
  if (!spec.ok()) {
    ADD_FAILURE() << spec.message();
    return 0;
  }
  v1::SubmitRequest req;
  req.add_jobspecs(job::jobspec_to_string(*spec));
  v1::SubmitReply rep;
  if (auto st = ctl.submit(ctld::Caller{0, 0}, req, &rep); !st.ok() || rep.jobids_size() == 0) {
    ADD_FAILURE() << st.message();
    return 0;
  }
  return rep.jobids(0);
}

// Submits `command` as root: its job id; 0, with a test failure, when it is refused.
inline uint64_t submit_command(ctld::Controller& ctl, std::vector<std::string> command) {
  job::JobRequest r;
  r.command = std::move(command);
  return submit_job(ctl, r);
}

}  // namespace corral::test
