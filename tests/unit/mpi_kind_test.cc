// The --mpi vocabulary as every layer checks it: the names, the service each asks of the
// agent, a jobspec's shell option, the command line, [steps] mpi-default, and PMIx
// namespace names nobody can guess.
#include "job/mpi_kind.h"

#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "cli/job_options.h"
#include "ctld/config.h"
#include "job/jobspec.h"

namespace corral {
namespace {

TEST(MpiKind, NamesAndServices) {
  for (const char* n : {"auto", "pmix", "pmi2", "pmi1", "cray-pals", "none"})
    EXPECT_EQ(*job::check_mpi_name(n, "--mpi"), n);
  EXPECT_EQ(*job::check_mpi_name("pmi", "--mpi"), "pmi1");
  EXPECT_EQ(*job::check_mpi_name("cray_shasta", "--mpi"), "cray-pals");  // Slurm's name
  EXPECT_EQ(job::mpi_service("cray-pals"), job::MpiService::cray_pals);
  auto secret = job::pals_secret();
  ASSERT_TRUE(secret.ok());
  EXPECT_NE(*secret, *job::pals_secret());
  EXPECT_EQ(job::mpi_service("pmix"), job::MpiService::pmix);
  EXPECT_EQ(job::mpi_service("none"), job::MpiService::none);
  for (const char* n : {"auto", "pmi1", "pmi2", ""}) EXPECT_EQ(job::mpi_service(n), job::MpiService::pmi);
  EXPECT_EQ(job::job_mpi_name("pmi2", "pmix"), "pmi2");  // the job's own wins
  EXPECT_EQ(job::job_mpi_name("", "pmix"), "pmix");      // else the site's
  EXPECT_EQ(job::job_mpi_name("", ""), "auto");          // an old controller sends none
  EXPECT_EQ(job::job_mpi_name("", "bogus"), "auto");     // nor is a bad one trusted
  auto bad = job::check_mpi_name(std::string(1000, 'x'), "--mpi");
  ASSERT_FALSE(bad.ok());
  EXPECT_LT(bad.message().size(), 200u);  // the value is shown cut short
  EXPECT_NE(job::check_mpi_name("openmpi", "--mpi").message().find("'openmpi' is not an MPI type"), std::string::npos);
  EXPECT_NE(job::check_mpi_name("cray-palz", "--mpi").message().find("cray-pals"), std::string::npos);
}

TEST(MpiKind, JobspecShellOption) {
  job::JobRequest req;
  req.command = {"./prog"};
  req.mpi = "pmix";
  auto spec = job::build_jobspec(req);
  ASSERT_TRUE(spec.ok()) << spec.message();
  EXPECT_EQ(spec->mpi, "pmix");
  EXPECT_EQ(spec->document->at("attributes").at("system").at("shell").at("options").at("mpi"), "pmix");
  auto text = job::jobspec_to_string(*spec);
  for (const char* bad : {"\"pmi9\"", "7", "[\"pmix\"]"}) {
    std::string t = text;
    t.replace(t.find("\"pmix\""), 6, bad);
    auto parsed = job::parse_jobspec(t);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.message().find("attributes.system.shell.options.mpi"), std::string::npos) << parsed.message();
  }
}

TEST(MpiKind, CommandLineAndConfiguration) {
  cli::JobContext ctx;
  ctx.cwd = "/tmp";
  auto opts = cli::parse_job_option_words({"--mpi=pmi"});
  ASSERT_TRUE(opts.ok()) << opts.message();
  auto req = cli::to_job_request(*opts, ctx);
  ASSERT_TRUE(req.ok()) << req.message();
  EXPECT_EQ(req->request.mpi, "pmi1");
  auto refused = cli::to_job_request(*cli::parse_job_option_words({"--mpi=lam"}), ctx);
  EXPECT_NE(refused.message().find("--mpi: 'lam'"), std::string::npos) << refused.message();

  auto c = ctld::load_config("", {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->steps.mpi_default, "auto");
  c = ctld::load_config("", {"steps.mpi-default=pmix"});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->steps.mpi_default, "pmix");
  c = ctld::load_config("", {"steps.mpi-default=mvapich"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("mpi-default"), std::string::npos) << c.message();
}

TEST(MpiKind, PmixNamespaceNamesCannotBeGuessed) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    auto n = job::pmix_namespace_name("42.3");
    ASSERT_TRUE(n.ok());
    ASSERT_EQ(n->rfind("corral.42.3.", 0), 0u) << *n;
    EXPECT_EQ(n->size(), std::string("corral.42.3.").size() + 16);
    seen.insert(*n);
  }
  EXPECT_EQ(seen.size(), 100u);
}

}  // namespace
}  // namespace corral
