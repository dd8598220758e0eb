// Infiniband discovery on sysfs trees built as files, capabilities and node classes, the
// --ib option, and device selection with every error (the seed's Example 2 and the
// slot orders where string and numeric order differ).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fabric/infiniband/ib_capabilities.h"
#include "fabric/infiniband/ib_config.h"
#include "fabric/infiniband/ib_select.h"
#include "fabric/infiniband/ib_sysfs.h"

namespace fs = std::filesystem;
using namespace corral::fabric::infiniband;

namespace {

constexpr const char* kCx6 = "MT28908 Family [ConnectX-6]";
constexpr const char* kCx7 = "MT2910 Family [ConnectX-7]";
constexpr const char* kCx5 = "MT27800 Family [ConnectX-5]";
constexpr const char* kFabric1 = "fe80:0000:0000:0001";
constexpr const char* kFabric2 = "fe80:0000:0000:0002";

void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

struct Port {
  std::string state = "4: ACTIVE";
  std::string link_layer = "InfiniBand";
  std::string prefix = kFabric1;
};

// A sysfs tree in a temporary directory, laid out as the kernel does.
class SysfsTree {
 public:
  SysfsTree()
      : root_(fs::temp_directory_path() / ("corral-ib-" + std::to_string(::getpid()) + "-" + std::to_string(n_++))) {
    fs::remove_all(root_);
  }
  ~SysfsTree() { fs::remove_all(root_); }
  const fs::path& root() const { return root_; }

  fs::path pci(const std::string& slot) const { return root_ / "devices" / "pci0000:00" / slot; }

  void device(const std::string& name, const std::string& slot, const std::string& dev_id,
              std::vector<Port> ports = {Port{}}, unsigned sriov = 0, const std::string& guid = "946d:ae03:002a:c100") {
    put(pci(slot) / "vendor", "0x15b3");
    put(pci(slot) / "device", dev_id);
    put(pci(slot) / "numa_node", "1");
    put(pci(slot) / "sriov_totalvfs", std::to_string(sriov));
    put(pci(slot) / "sriov_numvfs", "0");
    const fs::path ib = root_ / "class" / "infiniband" / name;
    fs::create_directories(ib);
    fs::create_symlink(fs::relative(pci(slot), ib), ib / "device");
    put(ib / "node_guid", guid);
    put(ib / "sys_image_guid", guid);
    put(ib / "fw_ver", "20.31.1014");
    for (size_t i = 0; i < ports.size(); ++i) {
      const fs::path p = ib / "ports" / std::to_string(i + 1);
      put(p / "state", ports[i].state);
      put(p / "phys_state", ports[i].state == "4: ACTIVE" ? "5: LinkUp" : "2: Polling");
      put(p / "rate", "200 Gb/sec (4X HDR)");
      put(p / "link_layer", ports[i].link_layer);
      put(p / "lid", "0x12");
      put(p / "gids" / "0", ports[i].prefix + ":0002:c903:0031:7891");
    }
  }

  void virtual_function(const std::string& name, const std::string& slot, const std::string& pf_slot) {
    device(name, slot, "0x101c");
    fs::create_symlink(fs::relative(pci(pf_slot), pci(slot)), pci(slot) / "physfn");
  }

 private:
  static inline int n_ = 0;
  fs::path root_;
};

Fabrics two_fabrics() { return *Fabrics::create({{"IbFabric1", kFabric1}, {"IbFabric2", kFabric2}}); }

std::vector<IbDevice> discovered(const SysfsTree& t, const Fabrics& f = two_fabrics()) {
  auto d = discover({t.root().string(), kDefaultPciIds}, f);
  EXPECT_TRUE(d) << d.message();
  return d ? d->devices : std::vector<IbDevice>{};
}

IbDevice made(const std::string& name, const std::string& slot, const std::string& model, const std::string& fabric,
              bool active = true, unsigned sriov = 0) {
  IbDevice d;
  d.name = name;
  d.slot = *parse_pci_slot(slot);
  d.model = model;
  d.vendor = "Mellanox Technologies";
  d.fabric = fabric;
  d.sriov_total = sriov;
  d.ports.push_back(
      IbPort{1, active ? "ACTIVE" : "DOWN", active ? "LinkUp" : "Polling", "200 Gb/sec (4X HDR)", "InfiniBand", 1, 0});
  return d;
}

IbRequest ask(const std::string& device, const std::string& fabric, unsigned instance) {
  IbRequest r;
  r.device = device;
  r.fabric = fabric;
  r.instance = instance;
  return r;
}

SelectContext context(const Fabrics& f) {
  SelectContext c;
  c.fabrics = &f;
  c.partition_known = [](const std::string& p) { return p == "storage" || p == "compute"; };
  c.node = "node3";
  return c;
}

std::string error_of(const std::vector<IbDevice>& devs, const std::vector<IbRequest>& reqs, const Fabrics& f) {
  auto r = select_devices(devs, reqs, context(f));
  return r ? std::string("(selected)") : r.message();
}

}  // namespace

TEST(IbPciSlot, ParsesAndOrdersNumerically) {
  auto a = parse_pci_slot("0000:CB:00.0"), b = parse_pci_slot("0000:ca:00.1");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->str(), "0000:cb:00.0");
  EXPECT_LT(*b, *a);  // as strings "0000:CB..." < "0000:ca...": the other way round
  auto vmd = parse_pci_slot("10000:01:00.0"), low = parse_pci_slot("9000:01:00.0");
  ASSERT_TRUE(vmd && low);
  EXPECT_LT(*low, *vmd);  // as strings "10000" < "9000"
  EXPECT_EQ(parse_pci_slot("ca:00.0")->str(), "0000:ca:00.0");
  for (const char* bad :
       {"", "0000:ca:00", "0000:ca:20.0", "0000:ca:00.8", "0000:1ca:00.0", "zz:00.0", "0000:ca:00.0x"})
    EXPECT_FALSE(parse_pci_slot(bad)) << bad;
}

TEST(IbFabrics, PrefixesMapToNamesAndTheRestToTheDefault) {
  Fabrics f = two_fabrics();
  EXPECT_EQ(f.of_prefix(*parse_subnet_prefix("fe80:0:0:2")), "IbFabric2");
  EXPECT_EQ(f.of_prefix(*gid_subnet_prefix("fe80:0000:0000:0009:0002:c903:0031:7891")), "default");
  EXPECT_TRUE(f.known("IbFabric1") && f.known("default") && !f.known("IbFabric3"));
  EXPECT_FALSE(Fabrics::create({{"A", kFabric1}, {"B", kFabric1}}));
  EXPECT_FALSE(Fabrics::create({{"A", kFabric1}, {"A", kFabric2}}));
  EXPECT_FALSE(Fabrics::create({{"bad name", kFabric1}}));
  EXPECT_FALSE(Fabrics::create({{"A", "fe80:0:0"}}));
}

TEST(IbDiscovery, DualPortCardOnOneFabricIsOneCapabilityOfTwo) {
  SysfsTree t;
  t.device("ibp202s0f0", "0000:ca:00.0", "0x101b");
  t.device("ibp202s0f1", "0000:ca:00.1", "0x101b");
  auto devs = discovered(t);
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0].vendor, "Mellanox Technologies");
  EXPECT_EQ(devs[0].model, kCx6);
  EXPECT_EQ(devs[0].slot.str(), "0000:ca:00.0");
  EXPECT_EQ(devs[0].numa_node, 1);
  EXPECT_EQ(devs[0].firmware, "20.31.1014");
  EXPECT_EQ(devs[0].ports[0].state, "ACTIVE");
  EXPECT_EQ(devs[0].ports[0].lid, 0x12u);
  EXPECT_EQ(devs[0].fabric, "IbFabric1");
  auto caps = capabilities_of(devs);
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_EQ(caps[0].count, 2u);
  EXPECT_EQ(to_json(caps)[0], (nlohmann::json{{"type", "Infiniband"},
                                              {"name", kCx6},
                                              {"vendor", "Mellanox Technologies"},
                                              {"fabric", "IbFabric1"},
                                              {"count", 2}}));
}

TEST(IbDiscovery, DualPortCardOnTwoFabricsIsTwoCapabilities) {
  SysfsTree t;
  t.device("ibp202s0f0", "0000:ca:00.0", "0x101b", {Port{"4: ACTIVE", "InfiniBand", kFabric1}});
  t.device("ibp202s0f1", "0000:ca:00.1", "0x101b", {Port{"4: ACTIVE", "InfiniBand", kFabric2}});
  auto caps = capabilities_of(discovered(t));
  ASSERT_EQ(caps.size(), 2u);
  EXPECT_EQ(caps[0].fabric, "IbFabric1");
  EXPECT_EQ(caps[1].fabric, "IbFabric2");
  EXPECT_EQ(caps[0].count + caps[1].count, 2u);
}

TEST(IbDiscovery, LeavesOutEthernetPortsAndVirtualFunctionsAndSaysWhy) {
  SysfsTree t;
  t.device("mlx5_0", "0000:ca:00.0", "0x101b", {Port{}}, 8);
  t.device("mlx5_1", "0000:ca:00.1", "0x101b", {Port{"4: ACTIVE", "Ethernet", kFabric1}});
  t.virtual_function("mlx5_2", "0000:ca:00.2", "0000:ca:00.0");
  t.device("mlx5_3", "0000:98:00.0", "0x1017", {Port{"1: DOWN", "InfiniBand", "fe80:0000:0000:0007"}});
  auto d = discover({t.root().string(), kDefaultPciIds}, two_fabrics());
  ASSERT_TRUE(d) << d.message();
  ASSERT_EQ(d->devices.size(), 2u);
  EXPECT_EQ(d->devices[0].name, "mlx5_3");  // slot 98 before ca
  EXPECT_EQ(d->devices[0].model, kCx5);
  EXPECT_EQ(d->devices[0].fabric, "default");  // an unnamed prefix
  EXPECT_FALSE(d->devices[0].active());
  EXPECT_EQ(d->devices[1].sriov_total, 8u);
  ASSERT_EQ(d->notes.size(), 2u);
  EXPECT_EQ(d->notes[0], "mlx5_1: link layer Ethernet: not an Infiniband device");
  EXPECT_EQ(d->notes[1], "mlx5_2: a virtual function of 0000:ca:00.0");
  auto caps = capabilities_of(d->devices);
  ASSERT_EQ(caps.size(), 2u);
  EXPECT_EQ(caps[0].name, kCx5);
  EXPECT_EQ(caps[0].inactive, std::vector<unsigned>{0});
}

TEST(IbDiscovery, NoInfinibandIsNoDevicesAndAMissingNameDatabaseIsAnError) {
  SysfsTree t;
  fs::create_directories(t.root());
  auto none = discover({t.root().string(), "/nonexistent/pci.ids"}, two_fabrics());
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->devices.empty());
  t.device("mlx5_0", "0000:ca:00.0", "0x101b");
  auto d = discover({t.root().string(), "/nonexistent/pci.ids"}, two_fabrics());
  ASSERT_FALSE(d);
  EXPECT_NE(d.message().find("pci.ids"), std::string::npos);
}

TEST(IbDevice, JsonRoundTripsAndHostileReportsAreRefused) {
  SysfsTree t;
  t.device("mlx5_0", "0000:ca:00.0", "0x101b", {Port{}}, 4);
  auto devs = discovered(t);
  ASSERT_EQ(devs.size(), 1u);
  auto back = device_from_json(to_json(devs[0]));
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(to_json(*back), to_json(devs[0]));
  auto j = to_json(devs[0]);
  j["name"] = std::string(1000, 'x');
  EXPECT_FALSE(device_from_json(j));
  j = to_json(devs[0]);
  j["slot"] = "not a slot";
  EXPECT_FALSE(device_from_json(j));
  j = to_json(devs[0]);
  j["ports"] = nlohmann::json::array();
  for (int i = 0; i < 100; ++i) j["ports"].push_back(to_json(devs[0])["ports"][0]);
  EXPECT_FALSE(device_from_json(j));
  j = to_json(devs[0]);
  j["vendor_id"] = "0xzzzz";
  EXPECT_FALSE(device_from_json(j));
  EXPECT_FALSE(device_from_json(nlohmann::json::array()));
}

// The seed's Example 2: four ConnectX-6 ports, two per fabric, counted per fabric in slot order.
TEST(IbSelect, SeedExample2PicksByFabricAndSlotOrder) {
  Fabrics f = two_fabrics();
  std::vector<IbDevice> devs = {
      made("d3456", "0000:ea:00.0", kCx6, "IbFabric1"), made("d1234", "0000:cb:00.0", kCx6, "IbFabric1"),
      made("d4567", "0000:eb:00.0", kCx6, "IbFabric2"), made("d2345", "0000:cd:00.0", kCx6, "IbFabric2")};
  auto pick = [&](const char* fabric, unsigned n) {
    auto r = select_devices(devs, {ask(kCx6, fabric, n)}, context(f));
    return r ? r->at(0).device.name : r.message();
  };
  EXPECT_EQ(pick("IbFabric1", 0), "d1234");
  EXPECT_EQ(pick("IbFabric1", 1), "d3456");
  EXPECT_EQ(pick("IbFabric2", 0), "d2345");
  EXPECT_EQ(pick("IbFabric2", 1), "d4567");
  // The seed's pathological but valid case: instance 1 on each fabric, different partitions.
  auto both = ask(kCx6, "IbFabric1", 1), other = ask(kCx6, "IbFabric2", 1);
  both.partition = "storage";
  other.partition = "compute";
  auto r = select_devices(devs, {both, other}, context(f));
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->at(0).partition, "storage");
  EXPECT_EQ(r->at(1).device.name, "d4567");
}

// NICo's fixture (six ports, two models): slot order, not discovery order, and numeric order
// where the strings disagree (upper-case hex, a VMD domain).
TEST(IbSelect, SlotOrderIsNumeric) {
  Fabrics f = two_fabrics();
  std::vector<IbDevice> devs = {
      made("c1f1", "0000:c1:00.1", kCx7, "default"),  made("c1f0", "0000:c1:00.0", kCx7, "default"),
      made("b1f1", "0000:b1:00.1", kCx7, "default"),  made("b1f0", "0000:b1:00.0", kCx7, "default"),
      made("x98f0", "0000:98:00.0", kCx5, "default"), made("x98f1", "0000:98:00.1", kCx5, "default")};
  auto r = select_devices(devs, {ask(kCx7, "", 1), ask(kCx5, "", 0)}, context(f));
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->at(0).device.name, "b1f1");
  EXPECT_EQ(r->at(1).device.name, "x98f0");
  std::vector<IbDevice> odd = {
      made("upper", "0000:CB:00.0", kCx6, "default"), made("lower", "0000:ca:00.0", kCx6, "default"),
      made("vmd", "10000:01:00.0", kCx6, "default"), made("low", "9000:01:00.0", kCx6, "default")};
  std::vector<std::string> order;
  for (unsigned i = 0; i < 4; ++i)
    order.push_back(select_devices(odd, {ask(kCx6, "", i)}, context(f))->at(0).device.name);
  EXPECT_EQ(order, (std::vector<std::string>{"lower", "upper", "low", "vmd"}));
}

TEST(IbSelect, EveryErrorSaysWhatIsWrong) {
  Fabrics f = two_fabrics();
  std::vector<IbDevice> devs = {made("mlx5_0", "0000:ca:00.0", kCx6, "IbFabric1", true, 4),
                                made("mlx5_1", "0000:ca:00.1", kCx6, "IbFabric1", false),
                                made("mlx5_2", "0000:cb:00.0", kCx6, "IbFabric2")};
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos ? ::testing::AssertionSuccess()
                                               : ::testing::AssertionFailure() << msg << " lacks " << part;
  };
  EXPECT_TRUE(has(error_of(devs, {ask("MT28908  Family [ConnectX-6]", "IbFabric1", 0)}, f), "no device"));
  EXPECT_TRUE(has(error_of(devs, {ask(kCx6, "IbFabric1", 2)}, f), "there are 2 of them on node3 (instances 0-1)"));
  EXPECT_TRUE(has(error_of(devs, {ask(kCx6, "IbFabric9", 0)}, f), "unknown fabric IbFabric9"));
  EXPECT_TRUE(
      has(error_of(devs, {ask(kCx6, "default", 0)}, f), "no \"MT28908 Family [ConnectX-6]\" on fabric default"));
  EXPECT_TRUE(has(error_of(devs, {ask(kCx6, "IbFabric1", 1)}, f), "is not active: port 1 DOWN (Polling)"));
  EXPECT_TRUE(has(error_of(devs, {ask(kCx6, "IbFabric1", 0), ask(kCx6, "IbFabric1", 0)}, f), "more than once"));
  IbRequest vf = ask(kCx6, "IbFabric1", 0);
  vf.virtual_function = true;
  vf.vf = 4;
  EXPECT_TRUE(has(error_of(devs, {vf}, f), "virtual function 4: the device has 4 (ids 0-3)"));
  IbRequest autovf = vf;
  autovf.vf.reset();
  vf.vf = 1;
  EXPECT_TRUE(has(error_of(devs, {vf, autovf}, f), "mixes explicit and automatic"));
  EXPECT_TRUE(has(error_of(devs, {vf, vf}, f), "virtual function 1 is asked for more than once"));
  IbRequest novf = ask(kCx6, "IbFabric2", 0);
  novf.virtual_function = true;
  EXPECT_TRUE(has(error_of(devs, {novf}, f), "SR-IOV is off"));
  EXPECT_TRUE(has(error_of(devs, {autovf, autovf, autovf, autovf, autovf}, f), "5 virtual functions asked for"));
  IbRequest part = ask(kCx6, "IbFabric1", 0);
  part.partition = "nosuch";
  EXPECT_TRUE(has(error_of(devs, {part}, f), "unknown partition nosuch"));
  // What works: a PF and automatic VFs on it, numbered from 0, and a partition of the job's own.
  part.partition = "job";
  auto r = select_devices(devs, {part, autovf, autovf}, context(f));
  ASSERT_TRUE(r) << r.message();
  EXPECT_FALSE(r->at(0).vf.has_value());
  EXPECT_EQ(r->at(1).vf, 0u);
  EXPECT_EQ(r->at(2).vf, 1u);
}

TEST(IbRequestOption, ParsesTheSeedsKeysAndRefusesTheRest) {
  auto r = parse_ib_option(R"(device="MT28908 Family [ConnectX-6]",fabric=IbFabric1,instance=1,vf=2,partition=job)");
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->device, kCx6);
  EXPECT_EQ(r->fabric, "IbFabric1");
  EXPECT_EQ(r->instance, 1u);
  EXPECT_TRUE(r->virtual_function);
  EXPECT_EQ(r->vf, 2u);
  EXPECT_EQ(r->partition, "job");
  auto plain = parse_ib_option("device=CX7,device_instance=0,function_type=virtual");
  ASSERT_TRUE(plain);
  EXPECT_TRUE(plain->virtual_function && !plain->vf);
  auto back = requests_from_json(to_json(std::vector<IbRequest>{*r, *plain}));
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(to_json(*back), to_json(std::vector<IbRequest>{*r, *plain}));
  for (const char* bad : {"", "fabric=IbFabric1", "device=\"open", "device=x,color=red", "device=x,instance=-1",
                          "device=x,instance=99999", "device=x,vf=2,function_type=physical", "device=x,fabric=a b",
                          "device=x,function_type=both", "device=\"x\"y"})
    EXPECT_FALSE(parse_ib_option(bad)) << bad;
  EXPECT_FALSE(parse_ib_option(std::string(5000, 'a')));
  EXPECT_FALSE(requests_from_json(nlohmann::json::object()));
  EXPECT_FALSE(requests_from_json(nlohmann::json::array({{{"fabric", "x"}}})));
  EXPECT_FALSE(requests_from_json(nlohmann::json::array({{{"device", "x"}, {"instance", -3}}})));
}

TEST(IbNodeClasses, IdenticalNodesShareAClassAndBrokenOnesAreFlagged) {
  auto node = [](bool port_up, bool card) {
    std::vector<IbDevice> d = {made("a", "0000:ca:00.0", kCx6, "IbFabric1"),
                               made("b", "0000:ca:00.1", kCx6, "IbFabric1", port_up)};
    if (card) d.push_back(made("c", "0000:cb:00.0", kCx7, "IbFabric2"));
    return capabilities_of(d);
  };
  auto classes = node_classes(
      {{"n1", node(true, true)}, {"n2", node(true, true)}, {"n3", node(false, true)}, {"n4", node(true, false)}});
  ASSERT_EQ(classes.size(), 2u);
  const auto& big = classes[0].nodes.size() == 3 ? classes[0] : classes[1];
  const auto& small = classes[0].nodes.size() == 3 ? classes[1] : classes[0];
  EXPECT_EQ(big.nodes, (std::vector<std::string>{"n1", "n2", "n3"}));
  ASSERT_EQ(big.degraded.size(), 1u);
  EXPECT_EQ(big.degraded.at("n3"), "MT28908 Family [ConnectX-6] on IbFabric1: instance 1 inactive");
  EXPECT_EQ(small.nodes, std::vector<std::string>{"n4"});
  ASSERT_EQ(small.degraded.count("n4"), 1u);
  EXPECT_NE(small.degraded.at("n4").find("missing MT2910 Family [ConnectX-7] x1 on IbFabric2"), std::string::npos);
}

namespace {

corral::hook::Setting text(const std::string& key, const std::string& value) {
  return {key, corral::hook::Setting::Kind::string, value, "corral.toml: infiniband." + key};
}
corral::hook::Setting flag(const std::string& key, bool value) {
  return {key, corral::hook::Setting::Kind::boolean, value ? "true" : "false", "corral.toml: infiniband." + key};
}

}  // namespace

TEST(IbConfig, ReadsFabricsPartitionsAndPools) {
  auto c =
      parse_ib_settings({flag("enabled", true), text("fabric[0].name", "IbFabric1"),
                         text("fabric[0].subnet-prefix", "fe80:0000:0000:0001"), text("fabric[1].name", "IbFabric2"),
                         text("fabric[1].subnet-prefix", "fe80:0:0:2"), text("partition[0].name", "storage"),
                         text("partition[0].pkey", "0x8100"), text("pkey-pool", "0x2000-0x2fff"),
                         text("guid-pool", "0x0002c90300a00000-0x0002c90300a000ff")});
  ASSERT_TRUE(c) << c.message();
  EXPECT_TRUE(c->enabled);
  ASSERT_EQ(c->fabrics.size(), 2u);
  EXPECT_EQ(c->fabrics[1].name, "IbFabric2");
  ASSERT_EQ(c->partitions.size(), 1u);
  EXPECT_EQ(c->partitions[0].pkey, 0x0100);  // the full-membership bit is not part of the key
  EXPECT_EQ(c->guid_first, 0x0002c90300a00000u);
  EXPECT_EQ(c->guid_count, 256u);
  EXPECT_EQ(*pkey_range_idset("0x2000-0x2fff"), "8192-12287");
}

TEST(IbConfig, RefusesWhatCannotWork) {
  auto err = [](corral::hook::Settings s) {
    auto c = parse_ib_settings(s);
    return c ? std::string() : c.message();
  };
  EXPECT_NE(err({text("pkey-pool", "0x7fff")}).find("default partition"), std::string::npos);
  EXPECT_NE(err({text("pkey-pool", "0x30-0x20")}).find("ends before"), std::string::npos);
  EXPECT_NE(err({text("guid-pool", "0x1-0x200000")}).find("at most"), std::string::npos);
  EXPECT_NE(err({text("guid-pool", "banana")}).find("GUID range"), std::string::npos);
  EXPECT_NE(err({text("partition[0].name", "job"), text("partition[0].pkey", "0x10")}).find("other than 'job'"),
            std::string::npos);
  EXPECT_NE(err({text("partition[0].name", "a"), text("partition[0].pkey", "0x10"), text("partition[1].name", "b"),
                 text("partition[1].pkey", "0x10")})
                .find("used twice"),
            std::string::npos);
  EXPECT_NE(
      err({text("partition[0].name", "a"), text("partition[0].pkey", "0x2001"), text("pkey-pool", "0x2000-0x2fff")})
          .find("named partition"),
      std::string::npos);
  EXPECT_NE(err({text("fabric[0].name", "A"), text("fabric[0].subnet-prefix", "fe80:0:0:1"),
                 text("fabric[1].name", "A"), text("fabric[1].subnet-prefix", "fe80:0:0:2")})
                .find("named twice"),
            std::string::npos);
  EXPECT_NE(err({text("subnet-manager", "ufm")}).find("ufm-url"), std::string::npos);
  EXPECT_NE(err({text("fabric[0].colour", "red")}).find("fabric[0].colour"), std::string::npos);
  EXPECT_FALSE(corral::hook::table_key("fabric[x].name"));
  EXPECT_FALSE(corral::hook::table_key("[0].name"));
  EXPECT_FALSE(corral::hook::table_key("fabric[0]."));
  EXPECT_FALSE(corral::hook::table_key("fabric[99999999999999999999].name"));
  EXPECT_EQ(corral::hook::table_key("fabric[12].subnet-prefix")->index, 12u);
}
