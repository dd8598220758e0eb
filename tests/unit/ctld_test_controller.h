// A controller for unit tests: its state in a test's temporary directory, commits not
// synced, started. Tests shape the Config first (test_config, then their own settings).
#pragma once

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "ctld/controller.h"
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

}  // namespace corral::test
