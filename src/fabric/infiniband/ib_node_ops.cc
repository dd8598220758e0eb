#include "fabric/infiniband/ib_node_ops.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fabric/infiniband/ib_config.h"
#include "fabric/infiniband/ib_select.h"
#include "fabric/infiniband/ib_sysfs.h"
#include "fabric/infiniband/parse_unsigned.h"
#include "util/unique_fd.h"
#include "util/write_all.h"

namespace corral::fabric::infiniband {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string undo_path(const std::string& state_dir, uint64_t jobid) {
  return fmt::format("{}/job-{}.undo.json", state_dir, jobid);
}

std::string read_attr(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

Status write_attr(const fs::path& p, const std::string& value) {
  std::ofstream out(p, std::ios::trunc);
  out << value << "\n";
  out.flush();
  if (!out) return Error{Errc::unavailable, fmt::format("cannot write '{}' to {}", value, p.string())};
  return {};
}

// 16 hex digits as the sriov/<vf>/{node,port} attributes take them: "00:02:c9:...".
std::string colon_guid(uint64_t guid) {
  std::string hex = guid_hex(guid), out;
  for (size_t i = 0; i < hex.size(); i += 2) out += (out.empty() ? "" : ":") + hex.substr(i, 2);
  return out;
}

// The Infiniband device of the PCI function `pci` (a VF), found by its resolved path.
std::string device_of_function(const fs::path& root, const fs::path& pci) {
  std::error_code ec;
  const fs::path want = fs::canonical(pci, ec);
  if (ec) return {};
  for (const auto& e : fs::directory_iterator(root / "class" / "infiniband", ec)) {
    std::error_code ec2;
    if (fs::canonical(e.path() / "device", ec2) == want && !ec2) return e.path().filename().string();
  }
  return {};
}

// Enables `need` VFs on the PF at `pci` when none are; the undo record learns to disable them.
Status enable_vfs(const fs::path& pci, unsigned need, json& undo) {
  const unsigned now = static_cast<unsigned>(parse_unsigned(read_attr(pci / "sriov_numvfs"), 10, 4096).value_or(0));
  if (now >= need) return {};
  if (now > 0)
    return invalid(fmt::format("{} has {} virtual functions enabled already (by something else); {} are needed",
                               pci.filename().string(), now, need));
  if (auto st = write_attr(pci / "sriov_numvfs", std::to_string(need)); !st) return st;
  undo["numvfs"].push_back(pci.string());
  return {};
}

Status set_vf_guid(const fs::path& pci, unsigned vf, uint64_t guid, json& undo) {
  const fs::path dir = pci / "sriov" / std::to_string(vf);
  for (const char* attr : {"node", "port"})
    if (auto st = write_attr(dir / attr, colon_guid(guid)); !st) return st;
  if (auto st = write_attr(dir / "policy", "Follow"); !st) return st;
  undo["guids"].push_back(dir.string());
  return {};
}

Status write_private(const std::string& path, const std::string& text, uint32_t uid, mode_t mode) {
  ::unlink(path.c_str());
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (fd.get() < 0) return Error{Errc::unavailable, fmt::format("cannot create {}: {}", path, std::strerror(errno))};
  if (uid != 0 && ::fchown(fd.get(), uid, static_cast<gid_t>(-1)) != 0)
    return Error{Errc::unavailable, fmt::format("cannot give {} to uid {}: {}", path, uid, std::strerror(errno))};
  if (!write_all(fd.get(), text)) return Error{Errc::unavailable, fmt::format("cannot write {}", path)};
  return {};
}

json interface_doc(const IbChoice& c, const NodeJob& job, const std::string& name, const std::string& guid) {
  const IbRequest& r = job.requests[c.request];
  const uint16_t pkey = job.pkeys.at(c.request);
  json i{{"device", name},
         {"model", c.device.model},
         {"vendor", c.device.vendor},
         {"fabric", c.fabric},
         {"device_instance", r.instance},
         {"function_type", c.vf ? "virtual" : "physical"},
         {"pci_slot", c.device.slot.str()},
         {"pf_device", c.device.name},
         {"pf_guid", plain_guid(c.device.node_guid)},
         {"guid", guid},
         {"port", c.device.ports.empty() ? 1u : c.device.ports.front().num},
         {"lid", c.device.ports.empty() ? 0u : c.device.ports.front().lid},
         {"partition", r.partition.empty() ? "default" : r.partition},
         {"pkey", fmt::format("{:#06x}", pkey == 0 ? kDefaultPkey : pkey)}};
  if (c.vf) i["virtual_function_id"] = *c.vf;
  return i;
}

}  // namespace

std::string sysfs_root_for(const std::string& root, const std::string& node) {
  std::error_code ec;
  if (!node.empty() && node.find('/') == std::string::npos && node != "." && node != ".." &&
      fs::is_directory(fs::path(root) / node, ec))
    return (fs::path(root) / node).string();
  return root;
}

std::string node_state_dir(const std::string& state_dir, const std::string& node) {
  if (node.empty() || node == "." || node == ".." || node.find('/') != std::string::npos) return state_dir;
  return state_dir + "/" + node;
}

std::string job_document_path(const std::string& state_dir, uint64_t jobid) {
  return fmt::format("{}/job-{}.json", state_dir, jobid);
}

json to_json(const NodeJob& j) {
  return json{{"jobid", j.jobid},
              {"uid", j.uid},
              {"interfaces", to_json(j.requests)},
              {"pkeys", j.pkeys},
              {"vf_guids", j.vf_guids}};
}

Result<NodeJob> node_job_from_json(const json& j) {
  NodeJob out;
  try {
    out.jobid = j.at("jobid").get<uint64_t>();
    out.uid = j.at("uid").get<uint32_t>();
    auto reqs = requests_from_json(j.at("interfaces"));
    if (!reqs) return reqs.error();
    out.requests = std::move(*reqs);
    out.pkeys = j.at("pkeys").get<std::vector<uint16_t>>();
    out.vf_guids = j.at("vf_guids").get<std::vector<uint64_t>>();
  } catch (const json::exception& e) {
    return invalid(std::string("CORRAL_IB_JOB: ") + e.what());
  }
  if (out.pkeys.size() != out.requests.size() || out.vf_guids.size() != out.requests.size())
    return invalid("CORRAL_IB_JOB: pkeys and vf_guids need one entry per interface");
  return out;
}

Result<json> node_prolog(const NodePaths& p, const Fabrics& fabrics, const NodeJob& job) {
  auto found = discover(DiscoveryOptions{p.sysfs_root, p.pci_ids}, fabrics);
  if (!found) return found.error();
  SelectContext ctx{&fabrics, [](const std::string&) { return true; }, p.node};
  auto chosen = select_devices(found->devices, job.requests, ctx);
  if (!chosen) return chosen.error();
  // The hook's directory, then the node's (0711 both: a job's user reaches its own
  // document by name and lists nothing).
  for (const auto& dir : {fs::path(p.state_dir).parent_path().string(), p.state_dir})
    if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST)
      return Error{Errc::unavailable, fmt::format("cannot create {}: {}", dir, std::strerror(errno))};
  json undo{{"numvfs", json::array()}, {"guids", json::array()}};
  json doc{{"jobid", job.jobid}, {"node", p.node}, {"interfaces", json::array()}};
  const fs::path root(p.sysfs_root);
  Status failed;
  for (const auto& c : *chosen) {
    const fs::path pci = root / "class" / "infiniband" / c.device.name / "device";
    std::string name = c.device.name, guid = plain_guid(c.device.node_guid);
    if (c.vf) {
      const uint64_t vf_guid = job.vf_guids.at(c.request);
      if (vf_guid == 0) {
        failed = invalid(fmt::format("interface {}: the controller gave its virtual function no GUID", c.request + 1));
        break;
      }
      if (failed = enable_vfs(pci, *c.vf + 1, undo); !failed) break;
      if (failed = set_vf_guid(pci, *c.vf, vf_guid, undo); !failed) break;
      name = device_of_function(root, pci / fmt::format("virtfn{}", *c.vf));
      if (name.empty()) {
        failed = Error{Errc::unavailable,
                       fmt::format("virtual function {} of {} has no Infiniband device", *c.vf, c.device.name)};
        break;
      }
      guid = guid_hex(vf_guid);
    }
    doc["interfaces"].push_back(interface_doc(c, job, name, guid));
  }
  // The record first: even a half-done prolog is undone by the epilog.
  if (auto st = write_private(undo_path(p.state_dir, job.jobid), undo.dump(), 0, 0600); !st) return st.error();
  if (!failed) return failed.error();
  if (auto st = write_private(job_document_path(p.state_dir, job.jobid), doc.dump(2) + "\n", job.uid, 0400); !st)
    return st.error();
  return doc;
}

Status node_epilog(const NodePaths& p, uint64_t jobid) {
  const std::string record = undo_path(p.state_dir, jobid);
  std::ifstream in(record);
  Status failed;
  if (in) {
    json undo = json::parse(in, nullptr, false);
    if (undo.is_object()) {
      for (const auto& dir : undo.value("guids", json::array()))
        if (dir.is_string())
          for (const char* attr : {"node", "port"})
            if (auto st = write_attr(fs::path(dir.get<std::string>()) / attr, colon_guid(0)); !st) failed = st;
      for (const auto& pci : undo.value("numvfs", json::array()))
        if (pci.is_string())
          if (auto st = write_attr(fs::path(pci.get<std::string>()) / "sriov_numvfs", "0"); !st) failed = st;
    }
  }
  if (!failed) return failed;
  ::unlink(job_document_path(p.state_dir, jobid).c_str());
  ::unlink(record.c_str());
  return {};
}

}  // namespace corral::fabric::infiniband
