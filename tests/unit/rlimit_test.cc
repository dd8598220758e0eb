// The submitter's resource limits travel with the job and bind its tasks.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/job_options.h"
#include "job/jobspec.h"
#include "node/exec/spawn_process.h"

namespace corral {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

cli::JobContext context_with_limits() {
  cli::JobContext ctx;
  ctx.cwd = "/home/u";
  ctx.now = 1700000000;
  ctx.rlimits = {{"nofile", 256}, {"core", 0}, {"stack", -1}};
  return ctx;
}

job::Jobspec jobspec_of(std::vector<std::string> words) {
  auto opts = cli::parse_job_option_words(std::move(words));
  EXPECT_TRUE(opts.ok()) << opts.message();
  auto job = cli::to_job_request(*opts, context_with_limits());
  EXPECT_TRUE(job.ok()) << job.message();
  job->request.command = {"true"};
  auto built = job::build_jobspec(job->request);
  EXPECT_TRUE(built.ok()) << built.message();
  auto spec = job::parse_jobspec(job::jobspec_to_string(*built));  // as the controller reads it
  EXPECT_TRUE(spec.ok()) << spec.message();
  return *spec;
}

TEST(Rlimits, EveryLimitTravelsByDefault) {
  auto spec = jobspec_of({});
  EXPECT_THAT(spec.rlimits,
              ::testing::UnorderedElementsAre(job::TaskRlimit{RLIMIT_NOFILE, 256}, job::TaskRlimit{RLIMIT_CORE, 0},
                                              job::TaskRlimit{RLIMIT_STACK, -1}));
}

TEST(Rlimits, PropagateChoosesWhich) {
  EXPECT_TRUE(jobspec_of({"--propagate=NONE"}).rlimits.empty());
  EXPECT_THAT(jobspec_of({"--propagate=NOFILE,core"}).rlimits,
              ::testing::UnorderedElementsAre(job::TaskRlimit{RLIMIT_NOFILE, 256}, job::TaskRlimit{RLIMIT_CORE, 0}));
  auto opts = cli::parse_job_option_words({"--propagate=NOFILES"});
  ASSERT_TRUE(opts.ok());
  auto job = cli::to_job_request(*opts, context_with_limits());
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.message(), HasSubstr("--propagate: unknown limit 'nofiles'"));
}

TEST(Rlimits, TheControllerRefusesBadValues) {
  auto doc = [](const std::string& limits) {
    return R"({"version":1,"resources":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}],)"
           R"("tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],)"
           R"("attributes":{"system":{"duration":0,"shell":{"options":{"rlimit":)" +
           limits + "}}}}}";
  };
  EXPECT_TRUE(job::parse_jobspec(doc(R"({"nofile":10,"as":-1})")).ok());
  EXPECT_THAT(job::parse_jobspec(doc(R"({"nofiles":10})")).message(), HasSubstr("unknown resource limit"));
  EXPECT_THAT(job::parse_jobspec(doc(R"({"nofile":-2})")).message(), HasSubstr("at least 0, or -1"));
  EXPECT_THAT(job::parse_jobspec(doc(R"({"nofile":"many"})")).message(), HasSubstr("at least 0, or -1"));
  EXPECT_THAT(job::parse_jobspec(doc(R"([1])")).message(), HasSubstr("rlimit"));
}

std::string run_and_read(node::SpawnRequest r, const fs::path& out) {
  r.output_path = out.string();
  auto p = node::spawn_process(r);
  EXPECT_TRUE(p) << p.message();
  if (!p) return {};
  int st = 0;
  ::waitpid(p->pid, &st, 0);
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

node::SpawnRequest ulimits_task() {
  node::SpawnRequest r;
  r.argv = {"/bin/sh", "-c", "ulimit -Sn; ulimit -Sc"};
  r.env = {"PATH=/usr/bin:/bin"};
  r.cwd = "/";
  r.rlimits = {{RLIMIT_NOFILE, 64}, {RLIMIT_CORE, 0}};
  return r;
}

TEST(Rlimits, TasksGetThemNotTheAgents) {
  fs::path dir = fs::temp_directory_path() / ("corral-rlimit-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::all);
  EXPECT_EQ(run_and_read(ulimits_task(), dir / "direct"), "64\n0\n");
  // Above the hard limit is capped at it: only root could raise a hard limit.
  rlimit hard{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &hard), 0);
  auto r = ulimits_task();
  r.rlimits = {{RLIMIT_NOFILE, -1}};
  r.argv = {"/bin/sh", "-c", "ulimit -Sn"};
  std::string want = hard.rlim_max == RLIM_INFINITY ? "unlimited\n" : std::to_string(hard.rlim_max) + "\n";
  EXPECT_EQ(run_and_read(r, dir / "capped"), want);
  const auto imp = fs::read_symlink("/proc/self/exe").parent_path() / "corral-imp";
  if (::geteuid() == 0 && fs::exists(imp)) {  // through corral-imp, as nobody
    auto n = ulimits_task();
    n.imp_path = imp.string();
    n.uid = n.gid = 65534;
    EXPECT_EQ(run_and_read(n, dir / "imp"), "64\n0\n");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace corral
