// HookContext::after_durable: a hook's action on the outside world runs only once the
// events it posted before are committed (a crash in between must not leave the outside
// ahead of the record), and at once rather than after a commit interval.
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "ctld/controller.h"
#include "ctld_test_controller.h"
#include "temp_dir.h"

namespace corral::ctld {
namespace {

// How many `witness` events of `jobid` another connection sees in the database.
int committed_witnesses(const std::string& db_path, uint64_t jobid) {
  sqlite3* db = nullptr;
  int n = -1;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM events WHERE jobid = ? AND name = 'witness'", -1, &st,
                           nullptr) == SQLITE_OK) {
      sqlite3_bind_int64(st, 1, static_cast<sqlite3_int64>(jobid));
      if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return n;
}

// Posts `witness` when a job is validated, then asks for an action after it is durable;
// the action looks at the database from outside, as a crash would leave it.
class WitnessHook : public hook::JobHook {
 public:
  explicit WitnessHook(std::string db_path) : db_path_(std::move(db_path)) {}
  std::string_view name() const override { return "witness"; }
  void on_event(hook::HookContext& ctx, const hook::JobView& job, const job::Event& ev) override {
    if (ev.name != "validate") return;
    ctx.post_event(job.id, "witness", "{}");
    ctx.after_durable([this, id = job.id] {
      seen.store(committed_witnesses(db_path_, id));
      ran.store(true);
    });
  }
  std::atomic<bool> ran{false};
  std::atomic<int> seen{-2};

 private:
  std::string db_path_;
};

TEST(CtldAfterDurable, RunsOnceThePostedEventsAreCommittedWithoutWaitingAnInterval) {
  spdlog::set_level(spdlog::level::warn);
  test::TempDir dir;
  const std::string db = dir.str() + "/corral.db";
  // An hour between unhurried commits: the action must hurry its own.
  auto store = store::Store::open(db, {.synchronous_full = false, .commit_interval = 3600});
  ASSERT_TRUE(store.ok()) << store.message();
  Controller ctl(test::test_config(dir), std::move(*store));
  auto hook = std::make_unique<WitnessHook>(db);
  WitnessHook& witness = *hook;
  ctl.add_hook(std::move(hook));
  ASSERT_TRUE(ctl.start().ok());
  auto link = test::register_one_node(ctl);
  ASSERT_TRUE(link);
  ASSERT_NE(test::submit_command(ctl, {"true"}), 0u);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!witness.ran.load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(witness.ran.load()) << "the action did not run within 10 s";
  EXPECT_EQ(witness.seen.load(), 1) << "the action ran before its event was committed";
  ctl.stop();
}

}  // namespace
}  // namespace corral::ctld
