#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "fabric/slingshot/cxi_device.h"
#include "fabric/slingshot/cxi_resources.h"
#include "fabric/slingshot/node_ops.h"
#include "fabric/slingshot/sim_cxi.h"
#include "temp_dir.h"

namespace ss = corral::fabric::slingshot;
using corral::Errc;

namespace {

class SlingshotSim : public ::testing::Test {
 protected:
  ss::SimConfig config(const std::string& toml) {
    auto c = ss::parse_sim_config(toml, "test.toml");
    EXPECT_TRUE(c.ok()) << c.message();
    return c.ok() ? *c : ss::SimConfig{};
  }

  std::unique_ptr<ss::SimCxiDevice> open(const ss::SimConfig& cfg, const std::string& node = "n1") {
    auto d = ss::SimCxiDevice::create(dir_, node, cfg, [this] { return now_; });
    EXPECT_TRUE(d.ok()) << d.message();
    return d.ok() ? std::move(*d) : nullptr;
  }

  static ss::ServiceDesc job_desc(uint32_t uid, std::vector<uint16_t> vnis) {
    ss::ServiceDesc d;
    d.member_uids = {uid};
    d.vnis = std::move(vnis);
    d.tcs = ss::kTcBestEffort | ss::kTcLowLatency;
    return d;
  }

  corral::test::TempDir tmp_{"corral-sim-cxi"};
  const std::string dir_ = tmp_.str();
  double now_ = 1000;
};

ss::Limit& at(ss::Limits& l, ss::Rsrc r) { return l[static_cast<size_t>(r)]; }
ss::Limit at(const ss::Limits& l, ss::Rsrc r) { return l[static_cast<size_t>(r)]; }

}  // namespace

// ---- the simulated device ----------------------------------------------------------------

TEST_F(SlingshotSim, NewNodeHasTheDefaultSystemService) {
  auto dev = open(ss::default_sim_config());
  auto nics = dev->list();
  ASSERT_TRUE(nics.ok()) << nics.message();
  ASSERT_EQ(nics->size(), 1u);
  EXPECT_EQ((*nics)[0].name, "cxi0");
  ASSERT_EQ((*nics)[0].services.size(), 1u);
  const auto& svc = (*nics)[0].services[0];
  EXPECT_EQ(svc.id, 1u);
  EXPECT_TRUE(svc.desc.system);
  EXPECT_EQ(svc.desc.vnis, (std::vector<uint16_t>{1, 10}));
  EXPECT_TRUE(svc.desc.member_uids.empty());
  EXPECT_EQ(at((*nics)[0].capacity, ss::Rsrc::TGQ).max, 512u);
}

TEST_F(SlingshotSim, AllocListDestroy) {
  auto dev = open(config("nics = 2"));
  auto id0 = dev->alloc_service("cxi0", job_desc(1000, {1024}));
  auto id1 = dev->alloc_service("cxi1", job_desc(1000, {1024}));
  ASSERT_TRUE(id0.ok()) << id0.message();
  ASSERT_TRUE(id1.ok()) << id1.message();
  EXPECT_EQ(*id0, 2u);  // the default service is 1
  EXPECT_EQ(*id1, 2u);  // ids are per NIC
  auto nics = dev->list();
  ASSERT_TRUE(nics.ok());
  ASSERT_EQ((*nics)[1].services.size(), 2u);
  EXPECT_EQ((*nics)[1].services[1].desc.member_uids, std::vector<uint32_t>{1000});
  ASSERT_TRUE(dev->destroy_service("cxi0", *id0).ok());
  EXPECT_EQ(dev->list()->at(0).services.size(), 1u);
  EXPECT_EQ(dev->destroy_service("cxi0", *id0).error().code, Errc::not_found);
  EXPECT_EQ(dev->destroy_service("cxi0", 1).error().code, Errc::permission_denied);  // system
  EXPECT_EQ(dev->alloc_service("cxi2", job_desc(1000, {1024})).error().code, Errc::not_found);
}

TEST_F(SlingshotSim, IdsAreNeverReused) {
  auto dev = open(ss::default_sim_config());
  auto a = dev->alloc_service("cxi0", job_desc(1000, {1024}));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(dev->destroy_service("cxi0", *a).ok());
  auto b = dev->alloc_service("cxi0", job_desc(1000, {1025}));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, *a + 1);
}

TEST_F(SlingshotSim, StateSurvivesANewDeviceObject) {
  uint32_t id = 0;
  {
    auto dev = open(ss::default_sim_config());
    auto r = dev->alloc_service("cxi0", job_desc(1000, {1024, 1025}));
    ASSERT_TRUE(r.ok());
    id = *r;
  }
  auto again = ss::open_cxi_device("sim:" + dir_, "n1");  // as a restarted agent would
  ASSERT_TRUE(again.ok()) << again.message();
  auto nics = (*again)->list();
  ASSERT_TRUE(nics.ok());
  ASSERT_EQ((*nics)[0].services.size(), 2u);
  EXPECT_EQ((*nics)[0].services[1].id, id);
  EXPECT_EQ((*nics)[0].services[1].desc.vnis, (std::vector<uint16_t>{1024, 1025}));
  // Other nodes have their own state.
  auto other = open(ss::default_sim_config(), "n2");
  EXPECT_EQ(other->list()->at(0).services.size(), 1u);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/n1.json"));
}

TEST_F(SlingshotSim, RefusesMoreThanFourVnis) {
  auto dev = open(ss::default_sim_config());
  auto r = dev->alloc_service("cxi0", job_desc(1000, {1024, 1025, 1026, 1027, 1028}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("at most 4 VNIs"), std::string::npos) << r.message();
  EXPECT_TRUE(dev->alloc_service("cxi0", job_desc(1000, {1024, 1025, 1026, 1027})).ok());
}

TEST_F(SlingshotSim, EnforcesCapacityCountingEveryServicesReservation) {
  auto dev = open(config("[capacity]\ntxqs = 100\n"));
  auto d = job_desc(1000, {1024});
  d.limited = true;
  at(d.limits, ss::Rsrc::TXQ) = {60, 100};
  ASSERT_TRUE(dev->alloc_service("cxi0", d).ok());
  auto second = dev->alloc_service("cxi0", d);  // 60 + 60 > 100
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, Errc::unavailable);
  EXPECT_NE(second.message().find("not enough txqs: 60 reserved asked, 40 left"), std::string::npos)
      << second.message();
  at(d.limits, ss::Rsrc::TXQ) = {40, 100};
  EXPECT_TRUE(dev->alloc_service("cxi0", d).ok());
  at(d.limits, ss::Rsrc::TXQ) = {0, 101};  // max above the NIC's total
  EXPECT_FALSE(dev->alloc_service("cxi0", d).ok());
}

TEST_F(SlingshotSim, SystemServicesReservationsAreCounted) {
  auto dev = open(config(R"(
default-service = false
[capacity]
les = 1000
[[system-service]]
name = "storage"
vnis = [2]
members = [0]
[system-service.limits]
les = { reserved = 900 }
)"));
  auto nics = dev->list();
  ASSERT_TRUE(nics.ok());
  ASSERT_EQ((*nics)[0].services.size(), 1u);
  EXPECT_EQ((*nics)[0].services[0].id, 1u);
  EXPECT_TRUE((*nics)[0].services[0].desc.system);
  EXPECT_EQ(at(ss::available_limits((*nics)[0]), ss::Rsrc::LE).max, 100u);
  auto d = job_desc(1000, {1024});
  d.limited = true;
  at(d.limits, ss::Rsrc::LE) = {101, 1000};
  EXPECT_FALSE(dev->alloc_service("cxi0", d).ok());
  at(d.limits, ss::Rsrc::LE) = {100, 1000};
  EXPECT_TRUE(dev->alloc_service("cxi0", d).ok());
}

TEST_F(SlingshotSim, BusyFaultAnswersBusyForItsSecondsAfterTheFirstAttempt) {
  auto cfg = config(R"(
[[fault]]
kind = "busy"
nodes = "n[1-2]"
seconds = 30
)");
  auto dev = open(cfg);
  auto id = dev->alloc_service("cxi0", job_desc(1000, {1024}));
  ASSERT_TRUE(id.ok());
  auto st = dev->destroy_service("cxi0", *id);
  EXPECT_EQ(st.error().code, Errc::unavailable);
  now_ += 29;
  // The first attempt is in the state: a new process sees the same deadline.
  auto dev2 = open(cfg);
  EXPECT_EQ(dev2->destroy_service("cxi0", *id).error().code, Errc::unavailable);
  now_ += 1;
  EXPECT_TRUE(dev2->destroy_service("cxi0", *id).ok());
  // Nodes outside the fault's hostlist are not busy.
  auto n3 = open(cfg, "n3");
  auto id3 = n3->alloc_service("cxi0", job_desc(1000, {1024}));
  ASSERT_TRUE(id3.ok());
  EXPECT_TRUE(n3->destroy_service("cxi0", *id3).ok());
}

TEST_F(SlingshotSim, BusyFaultWithoutSecondsIsForever) {
  auto dev = open(config("[[fault]]\nkind = \"busy\"\n"));
  auto id = dev->alloc_service("cxi0", job_desc(1000, {1024}));
  ASSERT_TRUE(id.ok());
  EXPECT_FALSE(dev->destroy_service("cxi0", *id).ok());
  now_ += 1e9;
  EXPECT_EQ(dev->destroy_service("cxi0", *id).error().code, Errc::unavailable);
}

TEST_F(SlingshotSim, AllocFailFault) {
  auto cfg = config(R"(
[[fault]]
kind = "alloc-fail"
nodes = "n1"
nic = "cxi0"
message = "simulated: out of service ids"
)");
  auto r = open(cfg)->alloc_service("cxi0", job_desc(1000, {1024}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "cxi0: cannot allocate a CXI service: simulated: out of service ids");
  EXPECT_TRUE(open(cfg, "n2")->alloc_service("cxi0", job_desc(1000, {1024})).ok());
}

TEST_F(SlingshotSim, MissingNicFault) {
  auto cfg = config("nics = 2\n[[fault]]\nkind = \"missing-nic\"\nnodes = \"n1\"\nnic = \"cxi1\"\n");
  auto dev = open(cfg);
  auto nics = dev->list();
  ASSERT_TRUE(nics.ok());
  ASSERT_EQ(nics->size(), 1u);
  EXPECT_EQ((*nics)[0].name, "cxi0");
  EXPECT_EQ(dev->alloc_service("cxi1", job_desc(1000, {1024})).error().code, Errc::not_found);
  EXPECT_EQ(open(cfg, "n2")->list()->size(), 2u);
}

TEST_F(SlingshotSim, UseChecksMembershipVniAndTrafficClass) {
  auto dev = open(ss::default_sim_config());
  auto id = dev->alloc_service("cxi0", job_desc(1000, {1024}));
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(dev->use("cxi0", *id, 1024, ss::kTcBestEffort, 1000).ok());
  EXPECT_TRUE(dev->use("cxi0", *id, 1024, ss::kTcLowLatency, 1000).ok());
  auto other = dev->use("cxi0", *id, 1024, ss::kTcBestEffort, 1001);
  EXPECT_EQ(other.error().code, Errc::permission_denied);
  EXPECT_EQ(other.message(), "permission denied: uid 1001 is not a member of service 2 on cxi0");
  auto vni = dev->use("cxi0", *id, 1025, ss::kTcBestEffort, 1000);
  EXPECT_EQ(vni.message(), "permission denied: VNI 1025 is not allowed by service 2 on cxi0");
  auto tc = dev->use("cxi0", *id, 1024, ss::kTcBulkData, 1000);
  EXPECT_EQ(tc.message(), "permission denied: traffic class BULK_DATA is not allowed by service 2 on cxi0");
  EXPECT_EQ(dev->use("cxi0", 99, 1024, ss::kTcBestEffort, 1000).error().code, Errc::not_found);
  // The default service lets anyone use VNIs 1 and 10 in any class.
  EXPECT_TRUE(dev->use("cxi0", 1, 10, ss::kTcDedicatedAccess, 4242).ok());
}

TEST_F(SlingshotSim, MalformedStateIsAClearError) {
  { std::ofstream(dir_ + "/n1.json") << "{not json"; }
  auto r = open(ss::default_sim_config())->list();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
  EXPECT_NE(r.message().find(dir_ + "/n1.json"), std::string::npos) << r.message();
}

TEST_F(SlingshotSim, BadNodeNameIsRefused) {
  EXPECT_FALSE(ss::SimCxiDevice::create(dir_, "../etc", ss::default_sim_config()).ok());
  EXPECT_FALSE(ss::SimCxiDevice::create(dir_, "", ss::default_sim_config()).ok());
}

// ---- configuration ---------------------------------------------------------------------------

TEST(SlingshotSimConfig, ParsesEveryKey) {
  auto c = ss::parse_sim_config(R"(
nics = 4
default-service = true
[capacity]
txqs = 512
[[system-service]]
name = "lustre"
nics = ["cxi0"]
vnis = [3]
members = [0]
tcs = ["BULK_DATA", "TC_BEST_EFFORT"]
[system-service.limits]
txqs = { reserved = 16, max = 64 }
[[fault]]
kind = "busy"
nodes = "node[1-3]"
nic = "cxi0"
seconds = 2.5
)",
                                "x.toml");
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->nics, 4u);
  EXPECT_EQ(at(c->capacity, ss::Rsrc::TXQ).max, 512u);
  EXPECT_EQ(at(c->capacity, ss::Rsrc::PTE).max, 2048u);
  ASSERT_EQ(c->system_services.size(), 2u);
  EXPECT_EQ(c->system_services[0].name, "default");
  const auto& lustre = c->system_services[1];
  EXPECT_EQ(lustre.desc.tcs, ss::kTcBulkData | ss::kTcBestEffort);
  EXPECT_TRUE(lustre.desc.limited);
  EXPECT_EQ(lustre.desc.limits[static_cast<size_t>(ss::Rsrc::TXQ)].reserved, 16u);
  EXPECT_EQ(lustre.desc.limits[static_cast<size_t>(ss::Rsrc::LE)].max, 16384u);  // defaults to capacity
  ASSERT_EQ(c->faults.size(), 1u);
  EXPECT_TRUE(c->faults[0].applies("node2", "cxi0"));
  EXPECT_FALSE(c->faults[0].applies("node4", "cxi0"));
  EXPECT_FALSE(c->faults[0].applies("node2", "cxi1"));
  EXPECT_DOUBLE_EQ(c->faults[0].seconds, 2.5);
}

TEST(SlingshotSimConfig, ErrorsNameTheFileAndKey) {
  auto bad = [](const char* text) {
    auto c = ss::parse_sim_config(text, "x.toml");
    EXPECT_FALSE(c.ok()) << text;
    return c.ok() ? std::string() : c.message();
  };
  EXPECT_EQ(bad("nic = 2"), "x.toml: nic: unknown key (nics, default-service, capacity, system-service, fault)");
  EXPECT_EQ(bad("[capacity]\ntxq = 3"),
            "x.toml: capacity.txq: unknown resource 'txq' (ptes, txqs, tgqs, eqs, cts, les, tles, acs)");
  EXPECT_EQ(bad("[[fault]]\nkind = \"bussy\""),
            "x.toml: fault[0].kind: unknown fault 'bussy' (busy, alloc-fail, missing-nic)");
  EXPECT_EQ(bad("[[fault]]\nkind = \"missing-nic\""),
            "x.toml: fault[0]: a missing-nic fault needs 'nic' (e.g. \"cxi1\")");
  EXPECT_NE(bad("[[fault]]\nkind = \"busy\"\nnodes = \"n[1-\"").find("x.toml: fault[0].nodes: "), std::string::npos);
  EXPECT_NE(bad("[[system-service]]\nvnis = [1,2,3,4,5]").find("at most 4 VNIs"), std::string::npos);
  EXPECT_NE(bad("nics = ").find("x.toml:1:"), std::string::npos);
  EXPECT_FALSE(ss::load_sim_config("/nonexistent/sim.toml").ok());
}

TEST(SlingshotOpenDevice, Specs) {
  auto none = ss::open_cxi_device("none", "n1");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE((*none)->list()->empty());
  auto bogus = ss::open_cxi_device("fancy", "n1");
  EXPECT_EQ(bogus.error().code, Errc::invalid_argument);
  EXPECT_FALSE(ss::open_cxi_device("sim:", "n1").ok());
  EXPECT_FALSE(ss::open_cxi_device("sim:/tmp:/nonexistent/sim.toml", "n1").ok());
  // No libcxi module is built here: the message says what to do.
  auto libcxi = ss::open_cxi_device("libcxi", "n1");
  if (!libcxi.ok()) {
    EXPECT_EQ(libcxi.message().rfind("libcxi backend: ", 0), 0u) << libcxi.message();
    EXPECT_NE(libcxi.message().find("or use --cxi sim:DIR"), std::string::npos);
  }
}

// ---- node operations (what corral-slingshot runs) ----------------------------------------

TEST_F(SlingshotSim, PrologCreatesOneServicePerNicAndIsIdempotent) {
  auto dev = open(config("nics = 2"));
  ss::PrologRequest req{{1024, 1025}, 1000, 4};
  auto r = ss::run_prolog(*dev, req);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->ok);
  EXPECT_TRUE(r->warnings.empty());
  ASSERT_EQ(r->created.size(), 2u);
  auto nics = dev->list();
  const auto& svc = (*nics)[1].services[1];
  EXPECT_EQ(svc.desc.member_uids, std::vector<uint32_t>{1000});
  EXPECT_EQ(svc.desc.tcs, ss::kTcBestEffort | ss::kTcLowLatency);
  EXPECT_TRUE(svc.desc.limited);
  EXPECT_EQ(svc.desc.limits[static_cast<size_t>(ss::Rsrc::TXQ)].reserved, 8u);
  auto again = ss::run_prolog(*dev, req);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->created.empty());
  EXPECT_EQ(again->existing.size(), 2u);
  EXPECT_EQ(dev->list()->at(0).services.size(), 2u);
}

TEST_F(SlingshotSim, PrologScalesBackAndWarns) {
  auto dev = open(config("[capacity]\ntxqs = 20\n"));
  auto r = ss::run_prolog(*dev, ss::PrologRequest{{1024}, 1000, 16});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ok);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_EQ(r->warnings[0].nic, "cxi0");
  EXPECT_EQ(r->warnings[0].text,
            "NIC short of resources, service 2 scaled back: txqs reserved 32 -> 20 (NIC cxi0 has 20 left)");
}

TEST_F(SlingshotSim, PrologRollsBackWhenANicFails) {
  auto dev = open(config("nics = 2\n[[fault]]\nkind = \"alloc-fail\"\nnic = \"cxi1\"\n"));
  auto r = ss::run_prolog(*dev, ss::PrologRequest{{1024}, 1000, 4});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok);
  ASSERT_EQ(r->errors.size(), 1u);
  EXPECT_EQ(r->errors[0].nic, "cxi1");
  auto nics = dev->list();
  ASSERT_TRUE(nics.ok());
  for (const auto& nic : *nics) EXPECT_EQ(nic.services.size(), 1u) << nic.name;
}

TEST_F(SlingshotSim, EpilogDestroysTheJobsServicesOnly) {
  auto dev = open(config("nics = 2"));
  ASSERT_TRUE(ss::run_prolog(*dev, ss::PrologRequest{{1024}, 1000, 4})->ok);
  ASSERT_TRUE(ss::run_prolog(*dev, ss::PrologRequest{{1025}, 1001, 4})->ok);
  auto r = ss::destroy_matching(*dev, ss::epilog_match({1024}), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->destroyed.size(), 2u);
  EXPECT_TRUE(r->busy.empty());
  auto nics = dev->list();
  ASSERT_TRUE(nics.ok());
  for (const auto& nic : *nics) {
    ASSERT_EQ(nic.services.size(), 2u);
    EXPECT_EQ(nic.services[1].desc.vnis, std::vector<uint16_t>{1025});
  }
}

TEST_F(SlingshotSim, EpilogRetriesBusyUntilTheTimeIsUp) {
  auto dev = open(config("[[fault]]\nkind = \"busy\"\nseconds = 2\n"));
  ASSERT_TRUE(ss::run_prolog(*dev, ss::PrologRequest{{1024}, 1000, 4})->ok);
  int sleeps = 0;
  ss::DestroyOptions opts;
  opts.now = [this] { return now_; };
  opts.sleep = [&](double s) { now_ += s, ++sleeps; };
  opts.retry_for = 1;  // shorter than the fault
  auto r = ss::destroy_matching(*dev, ss::epilog_match({1024}), opts);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->busy.size(), 1u);
  EXPECT_EQ(r->busy[0].svc.id, 2u);
  EXPECT_EQ(sleeps, 2);  // tries at 0, 0.5 and 1 s
  opts.retry_for = 5;    // housekeeping: long enough
  r = ss::destroy_matching(*dev, ss::epilog_match({1024}), opts);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->busy.empty());
  EXPECT_EQ(r->destroyed.size(), 1u);
}

TEST_F(SlingshotSim, CleanTakesServicesWhoseVnisAreAllInThePool) {
  auto dev = open(ss::default_sim_config());
  ASSERT_TRUE(dev->alloc_service("cxi0", job_desc(1000, {1024})).ok());
  ASSERT_TRUE(dev->alloc_service("cxi0", job_desc(1000, {1024, 5})).ok());  // 5 is not in the pool
  ASSERT_TRUE(dev->alloc_service("cxi0", job_desc(1000, {})).ok());         // any VNI: not ours
  auto r = ss::destroy_matching(*dev, ss::clean_match([](uint16_t v) { return v >= 1024; }), {});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->destroyed.size(), 1u);
  EXPECT_EQ(r->destroyed[0].second, 2u);
  EXPECT_EQ(dev->list()->at(0).services.size(), 3u);
}

TEST_F(SlingshotSim, ListFormats) {
  auto dev = open(ss::default_sim_config());
  ASSERT_TRUE(ss::run_prolog(*dev, ss::PrologRequest{{1024}, 1000, 4})->ok);
  auto nics = dev->list();
  const std::string json = ss::format_nics_json("n1", *nics);
  EXPECT_NE(json.find("\"tcs_mask\": \"0x0a\""), std::string::npos) << json;
  const std::string text = ss::format_nics_text("n1", *nics);
  EXPECT_NE(text.find("service 2"), std::string::npos) << text;
  EXPECT_EQ(ss::format_nics_text("n1", {}), "n1: no Slingshot NICs\n");
}
