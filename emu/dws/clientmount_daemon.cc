#include "clientmount_daemon.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "storage/dws/json_fields.h"
#include "util/unique_fd.h"

namespace corral::emu::dws {

using nlohmann::json;
using storage::dws::arr_at;
using storage::dws::KubeWriters;
using storage::dws::obj_at;
using storage::dws::str_at;

namespace {

constexpr const char* kFailMount = "emu.corral.dev/fail-mount";

// Gives the mount's directory to its user without following a link the path might end in.
std::string set_permissions(const std::string& path, uint32_t uid, uint32_t gid) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) return fmt::format("{}: {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return fmt::format("{}: {}", path, std::strerror(errno));
  if ((st.st_uid != uid || st.st_gid != gid) && fchown(fd.get(), uid, gid) != 0)
    return fmt::format("{}: cannot give it to {}:{}: {}", path, uid, gid, std::strerror(errno));
  if (fchmod(fd.get(), 0700) != 0) return fmt::format("{}: {}", path, std::strerror(errno));
  return {};
}

}  // namespace

ClientMountDaemon::ClientMountDaemon(std::shared_ptr<const storage::dws::KubeConfig> kube, std::set<std::string> nodes,
                                     std::string api_version)
    : kube_(std::move(kube)),
      nodes_(std::move(nodes)),
      base_("/apis/dataworkflowservices.github.io/" + api_version),
      writers_(kube_, 4) {}

void ClientMountDaemon::start() {
  storage::dws::WatchSink sink;
  sink.on_list = [this](std::vector<json>& items) {
    for (const auto& o : items) handle(o);
  };
  sink.on_events = [this](std::vector<json>& events) {
    for (const auto& ev : events)
      if (ev.value("type", "") != "DELETED") handle(ev["object"]);
  };
  sink.on_trouble = [](const std::string& why) { fmt::print(stderr, "corral-dws-clientmountd: {}\n", why); };
  watch_ = std::make_unique<storage::dws::KubeWatch>(kube_, base_ + "/clientmounts", "", std::move(sink));
  watch_->start();
}

void ClientMountDaemon::stop() {
  if (watch_) watch_->stop();
  writers_.stop();
}

// The status the ClientMount should have, or null when it has it already.
json ClientMountDaemon::carry_out(const json& obj) const {
  const json& spec = obj_at(obj, "spec");
  const json& status = obj_at(obj, "status");
  const std::string desired = spec.value("desiredState", "");
  if (desired != "mounted" && desired != "unmounted") return nullptr;
  const json& ann = obj_at(obj_at(obj, "metadata"), "annotations");
  // The schema wants a state per mount even when they failed.
  json failed_mounts = json::array();
  for (size_t i = 0; i < arr_at(spec, "mounts").size(); ++i)
    failed_mounts.push_back({{"state", "unmounted"}, {"ready", false}});
  if (desired == "mounted" && ann.contains(kFailMount)) {
    if (status.contains("error")) return nullptr;
    return {{"mounts", failed_mounts},
            {"error",
             {{"severity", "Fatal"},
              {"type", "Internal"},
              {"userMessage", ann.value(kFailMount, "mount failed")},
              {"debugMessage", "emulated mount failure on " + spec.value("node", "")}}},
            {"allReady", false}};
  }
  json mounts = json::array();
  bool same = status.value("allReady", false) && status.contains("mounts");
  const json& have = arr_at(status, "mounts");
  const json& want = arr_at(spec, "mounts");
  for (size_t i = 0; i < want.size(); ++i) {
    if (i >= have.size() || have[i].value("state", "") != desired) same = false;
    mounts.push_back({{"state", desired}, {"ready", true}});
  }
  if (same) return nullptr;
  if (desired == "mounted")
    for (const auto& m : want) {
      if (!m.value("setPermissions", false)) continue;
      std::string err = set_permissions(m.value("mountPath", ""), m.value("userID", 0u), m.value("groupID", 0u));
      if (!err.empty())
        return {{"mounts", failed_mounts},
                {"error", {{"severity", "Fatal"}, {"type", "Internal"}, {"userMessage", "mount failed: " + err}}},
                {"allReady", false}};
    }
  return {{"mounts", mounts}, {"allReady", true}, {"error", nullptr}};
}

void ClientMountDaemon::handle(const json& obj) {
  const std::string ns = str_at(obj_at(obj, "metadata"), "namespace");
  if (!nodes_.count(ns)) return;
  json status;
  try {
    status = carry_out(obj);
  } catch (const std::exception& e) {
    fmt::print(stderr, "corral-dws-clientmountd: a ClientMount of an unexpected shape: {}\n", e.what());
    return;
  }
  if (status.is_null()) return;
  const std::string path =
      fmt::format("{}/namespaces/{}/clientmounts/{}/status", base_, ns, str_at(obj_at(obj, "metadata"), "name"));
  writers_.post(path, [path, status](KubeWriters::Writer& w) -> KubeWriters::Task {
    const json patch = {{"status", status}};
    auto r = co_await w.merge_patch(path, patch);
    if (!r || (!r->ok() && r->http != 404))
      fmt::print(stderr, "corral-dws-clientmountd: {}\n",
                 r ? storage::dws::reply_error(*r, "status of " + path).message : r.message());
  });
}

}  // namespace corral::emu::dws
