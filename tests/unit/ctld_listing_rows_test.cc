// The controller's listing rows: rows follow their jobs through changes, ends and jobs
// added behind their back, always in id order, and interned text is shared and released.
#include "ctld/listing_rows.h"

#include <gtest/gtest.h>

#include <string>

namespace corral::ctld {
namespace {

using Jobs = ListingRows::Jobs;

void add_job(Jobs& jobs, uint64_t id, const std::string& name, job::JobState state) {
  auto rec = std::make_unique<ctld::JobRecord>();
  rec->id = id;
  rec->userid = 1000 + static_cast<uint32_t>(id);
  auto spec = std::make_shared<job::Jobspec>();
  spec->name = name;
  spec->ntasks = 2;
  rec->spec = std::move(spec);
  rec->status.state = state;
  rec->reason = "JobHeldUser";
  jobs[id] = std::move(rec);
}

void rename(Jobs& jobs, uint64_t id, const std::string& name) {
  auto spec = std::make_shared<job::Jobspec>(*jobs.at(id)->spec);
  spec->name = name;
  jobs.at(id)->spec = std::move(spec);
}

std::vector<std::string> live_names(const ListingRows& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows.rows())
    if (r.live) out.push_back(std::to_string(r.id) + ":" + std::string(rows.text().at(r.name)));
  return out;
}

TEST(TextPool, SharesTextAndReleasesItWhenUnused) {
  TextPool pool;
  EXPECT_EQ(pool.add(""), 0u);
  uint32_t a = pool.add("alpha");
  EXPECT_EQ(pool.add("alpha"), a);
  EXPECT_EQ(pool.at(a), "alpha");
  uint32_t i = 0;
  pool.release(a);
  EXPECT_TRUE(pool.find("alpha", &i));  // one holder left
  pool.release(a);
  EXPECT_FALSE(pool.find("alpha", &i));
  uint32_t b = pool.add("beta");
  EXPECT_EQ(pool.at(b), "beta");
}

TEST(ListingRows, FollowJobsInIdOrder) {
  Jobs jobs;
  ListingRows rows;
  for (uint64_t id : {3, 1, 2}) {
    add_job(jobs, id, "job" + std::to_string(id), job::JobState::SCHED);
    rows.changed(id, jobs);
  }
  rows.sync(jobs);
  EXPECT_EQ(live_names(rows), (std::vector<std::string>{"1:job1", "2:job2", "3:job3"}));
  EXPECT_EQ(rows.rows()[0].userid, 1001u);
  EXPECT_EQ(rows.rows()[0].ntasks, 2u);
  EXPECT_EQ(rows.text().at(rows.rows()[0].reason), "JobHeldUser");

  rename(jobs, 2, "renamed");
  jobs.at(2)->status.state = job::JobState::RUN;
  rows.changed(2, jobs);
  jobs.erase(1);
  rows.changed(1, jobs);
  rows.sync(jobs);
  EXPECT_EQ(live_names(rows), (std::vector<std::string>{"2:renamed", "3:job3"}));
  for (const auto& r : rows.rows())
    if (r.id == 2) {
      EXPECT_EQ(r.state, job::JobState::RUN);
      EXPECT_EQ(r.reason, 0u);  // running jobs show no pending reason
    }
}

TEST(ListingRows, AJobAddedWithoutAChangeIsFoundBySync) {
  Jobs jobs;
  ListingRows rows;
  add_job(jobs, 5, "five", job::JobState::SCHED);
  rows.changed(5, jobs);
  rows.sync(jobs);
  add_job(jobs, 4, "four", job::JobState::SCHED);  // nobody called changed(4)
  rows.sync(jobs);
  EXPECT_EQ(live_names(rows), (std::vector<std::string>{"4:four", "5:five"}));
}

TEST(ListingRows, ManyEndedJobsAreCompactedAway) {
  Jobs jobs;
  ListingRows rows;
  for (uint64_t id = 1; id <= 3000; ++id) {
    add_job(jobs, id, "j", job::JobState::SCHED);
    rows.changed(id, jobs);
  }
  rows.sync(jobs);
  for (uint64_t id = 1; id <= 2990; ++id) {
    jobs.erase(id);
    rows.changed(id, jobs);
  }
  rows.sync(jobs);
  EXPECT_EQ(live_names(rows).size(), 10u);
  EXPECT_LT(rows.rows().size(), 1100u);  // dead rows went once they outnumbered the live
  EXPECT_EQ(live_names(rows).front(), "2991:j");
}

}  // namespace
}  // namespace corral::ctld
