#include "ctld/config.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include <toml++/toml.h>

#include "job/mpi_kind.h"
#include "job/port_range.h"
#include "util/units.h"

namespace corral::ctld {
namespace {

// An integer only from an integer node: toml++ converting a float (6e84) is undefined.
std::optional<int64_t> integer_of(const toml::node& n) {
  if (!n.is_integer()) return std::nullopt;
  return n.value<int64_t>();
}

Status set_duration(double& out, const toml::node& n, const std::string& where) {
  if (auto v = n.value<double>()) {
    if (*v < 0) return invalid(fmt::format("{}: must not be negative", where));
    out = *v;
    return {};
  }
  if (auto s = n.value<std::string>()) {
    auto d = parse_duration(*s);
    if (!d) return invalid(fmt::format("{}: {}", where, d.message()));
    out = *d;
    return {};
  }
  return invalid(fmt::format("{}: expected a duration such as \"30s\"", where));
}

Status set_string(std::string& out, const toml::node& n, const std::string& where) {
  auto s = n.value<std::string>();
  if (!s) return invalid(fmt::format("{}: expected a string", where));
  out = *s;
  return {};
}

Status set_bool(bool& out, const toml::node& n, const std::string& where) {
  auto b = n.value<bool>();  // (which would also take 3 for true)
  if (!n.is_boolean() || !b) return invalid(fmt::format("{}: expected true or false", where));
  out = *b;
  return {};
}

Status set_uint(unsigned& out, const toml::node& n, const std::string& where, unsigned max) {
  auto v = integer_of(n);
  if (!v || *v < 0 || *v > max) return invalid(fmt::format("{}: expected an integer from 0 to {}", where, max));
  out = static_cast<unsigned>(*v);
  return {};
}

Status set_size(uint64_t& out, const toml::node& n, const std::string& where, uint64_t min) {
  std::optional<uint64_t> v;
  if (auto i = integer_of(n); i && *i >= 0)
    v = static_cast<uint64_t>(*i);
  else if (auto s = n.value<std::string>()) {
    auto parsed = parse_size(*s);
    if (!parsed) return invalid(fmt::format("{}: {}", where, parsed.message()));
    v = *parsed;
  }
  if (!v || *v < min)
    return invalid(fmt::format("{}: expected a size of at least {} bytes, such as \"4MiB\"", where, min));
  out = *v;
  return {};
}

Status apply_limits_key(LimitsConfig& l, const std::string& key, const toml::node& n, const std::string& where) {
  if (key == "max-submit-jobs") return set_uint(l.max_submit_jobs, n, where, 100000000);
  if (key == "max-running-jobs") return set_uint(l.max_running_jobs, n, where, 100000000);
  if (key == "submit-burst") return set_uint(l.submit_burst, n, where, 1000000);
  if (key == "submit-rate") {
    auto v = n.value<double>();
    if (!v || *v < 0) return invalid(fmt::format("{}: expected submissions per second (0 = no limit)", where));
    l.submit_rate = *v;
    return {};
  }
  if (key == "max-batch-script") return set_size(l.max_batch_script, n, where, 1024);
  if (key == "max-jobspec") return set_size(l.max_jobspec, n, where, 4096);
  return invalid(fmt::format("{}: unknown key", where));
}

// private-data: a list of what to hide from other users ("jobs"), like Slurm's PrivateData.
// "HOST:PORT" with a port of 1-65535 (HOST may be "[v6 address]").
Status set_listen(std::vector<std::string>& out, const toml::node& n, const std::string& where) {
  const auto* arr = n.as_array();
  if (arr == nullptr) return invalid(fmt::format("{}: expected a list such as [\"0.0.0.0:6817\"]", where));
  out.clear();
  for (const auto& item : *arr) {
    auto v = item.value<std::string>();
    if (!v) return invalid(fmt::format("{}: expected a list of strings", where));
    const size_t colon = v->rfind(':');
    const std::string port = colon == std::string::npos ? "" : v->substr(colon + 1);
    int number = 0;
    for (char ch : port) number = (ch >= '0' && ch <= '9' && number < 100000) ? number * 10 + (ch - '0') : 100000;
    if (colon == 0 || colon == std::string::npos || port.empty() || number < 1 || number > 65535)
      return invalid(fmt::format("{}: '{}' is not HOST:PORT (e.g. 0.0.0.0:6817)", where, *v));
    out.push_back(*v);
  }
  return {};
}

Status set_auth(net::AuthMethod& out, const toml::node& n, const std::string& where) {
  std::string text;
  if (auto st = set_string(text, n, where); !st.ok()) return st;
  auto method = net::parse_auth_method(text);
  if (!method) return invalid(where + ": " + method.message());
  out = *method;
  return {};
}

Status set_private_data(bool& jobs, const toml::node& n, const std::string& where) {
  std::vector<std::string> items;
  if (auto s = n.value<std::string>()) {
    if (!s->empty()) items.push_back(*s);
  } else if (const auto* arr = n.as_array()) {
    for (const auto& item : *arr) {
      auto v = item.value<std::string>();
      if (!v) return invalid(fmt::format("{}: expected a list of strings", where));
      items.push_back(*v);
    }
  } else {
    return invalid(fmt::format("{}: expected a list such as [\"jobs\"]", where));
  }
  jobs = false;
  for (const auto& i : items) {
    if (i != "jobs") return invalid(fmt::format("{}: unknown item '{}' (known: jobs)", where, i));
    jobs = true;
  }
  return {};
}

// A key of a hook's section, for the hook to check (hook/settings.h).
hook::Setting setting_of(const std::string& key, const toml::node& n, const std::string& where) {
  hook::Setting s{key, hook::Setting::Kind::other, {}, where};
  if (auto v = n.value_exact<std::string>()) {
    s.kind = hook::Setting::Kind::string;
    s.text = *v;
  } else if (auto i = integer_of(n)) {
    s.kind = hook::Setting::Kind::integer;
    s.text = std::to_string(*i);
  } else if (n.is_floating_point()) {
    s.kind = hook::Setting::Kind::floating;
    s.text = fmt::format("{}", *n.value<double>());
  } else if (auto b = n.value_exact<bool>()) {
    s.kind = hook::Setting::Kind::boolean;
    s.text = *b ? "true" : "false";
  }
  return s;
}

// A hook's key; an array of tables ([[infiniband.fabric]]) becomes one setting per field,
// keyed "fabric[0].name" (hook/settings.h).
Status add_hook_setting(hook::Settings& out, const std::string& key, const toml::node& n, const std::string& where) {
  const auto* arr = n.as_array();
  if (arr == nullptr || arr->empty() || !arr->front().is_table()) {
    out.push_back(setting_of(key, n, where));
    return {};
  }
  if (arr->size() > hook::kMaxSettingTables)
    return invalid(fmt::format("{}: at most {} tables", where, hook::kMaxSettingTables));
  for (size_t i = 0; i < arr->size(); ++i) {
    const auto* t = (*arr)[i].as_table();
    if (t == nullptr) return invalid(fmt::format("{}[{}]: expected a table", where, i));
    for (const auto& [k, v] : *t) {
      std::string field = fmt::format("{}[{}].{}", key, i, k.str());
      out.push_back(setting_of(field, v, fmt::format("{}[{}].{}", where, i, k.str())));
    }
  }
  return {};
}

// A number of ports or agents: at least `min`, at most 65535.
Status set_count(unsigned& out, const toml::node& n, const std::string& where, unsigned min) {
  auto v = integer_of(n);
  if (!v || *v < static_cast<int64_t>(min) || *v > 65535)
    return invalid(fmt::format("{}: expected an integer from {} to 65535", where, min));
  out = static_cast<unsigned>(*v);
  return {};
}

Status apply_steps_key(StepsConfig& s, const std::string& key, const toml::node& n, const std::string& where) {
  if (key == "fanout-width") return set_count(s.fanout_width, n, where, 2);
  if (key == "mpi-ports-per-job") return set_count(s.mpi_ports_per_job, n, where, 1);
  if (key == "mpi-ports-per-step") return set_count(s.mpi_ports_per_step, n, where, 1);
  if (key == "mpi-default") {
    std::string name;
    if (auto st = set_string(name, n, where); !st.ok()) return st;
    auto checked = job::check_mpi_name(name, where);
    if (!checked) return checked.error();
    s.mpi_default = std::move(*checked);
    return {};
  }
  if (key == "mpi-ports") {
    if (auto port = integer_of(n)) {
      s.mpi_ports = std::to_string(*port);  // a single port, written as a number
    } else if (auto st = set_string(s.mpi_ports, n, where); !st.ok()) {
      return st;
    }
    if (s.mpi_ports.empty()) return {};
    if (auto r = job::PortRange::parse(s.mpi_ports); !r) return invalid(fmt::format("{}: {}", where, r.message()));
    return {};
  }
  return invalid(fmt::format("{}: unknown key", where));
}

// Keys that are only wrong together, checked once everything is read.
Status check_steps(const StepsConfig& s) {
  if (s.mpi_ports_per_step > s.mpi_ports_per_job)
    return invalid(
        fmt::format("steps.mpi-ports-per-step ({}) is larger than "
                    "steps.mpi-ports-per-job ({})",
                    s.mpi_ports_per_step, s.mpi_ports_per_job));
  if (s.mpi_ports.empty()) return {};
  auto range = job::PortRange::parse(s.mpi_ports);
  if (!range) return invalid("steps.mpi-ports: " + range.message());
  if (s.mpi_ports_per_job > range->size())
    return invalid(
        fmt::format("steps.mpi-ports-per-job ({}) is larger than the {} ports of "
                    "steps.mpi-ports ({})",
                    s.mpi_ports_per_job, range->size(), s.mpi_ports));
  return {};
}

Status apply_node_key(Config& c, const std::string& key, const toml::node& n, const std::string& where) {
  if (key == "job-pids-max") {
    auto v = integer_of(n);
    if (!v || *v < 0 || *v > (int64_t{1} << 22))
      return invalid(where + ": expected a number of processes from 0 (no limit) to 4194304");
    c.node_job_pids_max = static_cast<uint64_t>(*v);
    return {};
  }
  if (key == "cpu-bind") {
    std::string v;
    if (auto st = set_string(v, n, where); !st) return st;
    if (v != "cores" && v != "none") return invalid(where + ": expected \"cores\" or \"none\", got \"" + v + "\"");
    c.node_cpu_bind = v == "cores";
    return {};
  }
  return invalid(fmt::format("{}: unknown key", where));
}

Status apply_key(Config& c, const std::string& section, const std::string& key, const toml::node& n,
                 const std::string& where) {
  if (section == "controller") {
    if (key == "socket") return set_string(c.socket, n, where);
    if (key == "listen") return set_listen(c.listen, n, where);
    if (key == "auth") return set_auth(c.auth, n, where);
    if (key == "munge-socket") return set_string(c.munge_socket, n, where);
    if (key == "tls-cert") return set_string(c.tls_cert, n, where);
    if (key == "tls-key") return set_string(c.tls_key, n, where);
    if (key == "state-dir") return set_string(c.state_dir, n, where);
    if (key == "heartbeat-interval") return set_duration(c.heartbeat_interval, n, where);
    if (key == "node-timeout") return set_duration(c.node_timeout, n, where);
    if (key == "isolation-timeout") return set_duration(c.isolation_timeout, n, where);
    if (key == "kill-grace") return set_duration(c.kill_grace, n, where);
    if (key == "sync-full") return set_bool(c.sync_full, n, where);
    if (key == "commit-interval") return set_duration(c.commit_interval, n, where);
    if (key == "key-file") return set_string(c.key_file, n, where);
    if (key == "private-data") return set_private_data(c.private_jobs, n, where);
  } else if (section == "limits") {
    return apply_limits_key(c.limits, key, n, where);
  } else if (section == "steps") {
    return apply_steps_key(c.steps, key, n, where);
  } else if (section == "topology") {
    if (key == "file") return set_string(c.topology_file, n, where);
    if (key == "max-switch-wait") return set_duration(c.max_switch_wait, n, where);
  } else if (section == "node") {
    return apply_node_key(c, key, n, where);
  } else if (auto hs = c.hook_settings.find(section); hs != c.hook_settings.end()) {
    return add_hook_setting(hs->second, key, n, where);
  } else if (section == "job") {
    if (key == "prolog") return set_string(c.prolog, n, where);
    if (key == "epilog") return set_string(c.epilog, n, where);
    if (key == "housekeeping") return set_string(c.housekeeping, n, where);
    if (key == "prolog-timeout") return set_duration(c.prolog_timeout, n, where);
    if (key == "epilog-timeout") return set_duration(c.epilog_timeout, n, where);
    if (key == "housekeeping-timeout") return set_duration(c.housekeeping_timeout, n, where);
    if (key == "default-time-limit") return set_duration(c.default_time_limit, n, where);
    if (key == "max-time-limit") return set_duration(c.max_time_limit, n, where);
    if (key == "requeue") return set_bool(c.requeue, n, where);
    if (key == "max-requeue") return set_uint(c.max_requeue, n, where, 1000);
  }
  return invalid(fmt::format("{}: unknown key", where));
}

Status apply_partitions(Config& c, const toml::array& arr, const std::string& file) {
  for (size_t i = 0; i < arr.size(); ++i) {
    std::string where = fmt::format("{}: partition[{}]", file, i);
    const auto* t = arr[i].as_table();
    if (!t) return invalid(where + ": expected a table");
    PartitionConfig p;
    for (const auto& [k, v] : *t) {
      std::string key(k.str());
      Status st;
      if (key == "name")
        st = set_string(p.name, v, where + ".name");
      else if (key == "nodes")
        st = set_string(p.nodes, v, where + ".nodes");
      else if (key == "default")
        st = set_bool(p.is_default, v, where + ".default");
      else if (key == "topology")
        st = set_string(p.topology, v, where + ".topology");
      else
        st = invalid(fmt::format("{}.{}: unknown key", where, key));
      if (!st.ok()) return st;
    }
    if (p.name.empty()) return invalid(where + ": missing name");
    c.partitions.push_back(std::move(p));
  }
  return {};
}

Status apply_table(Config& c, const toml::table& root, const std::string& file) {
  for (const auto& [sk, sv] : root) {
    std::string section(sk.str());
    if (section == "partition") {
      const auto* arr = sv.as_array();
      if (!arr) return invalid(file + ": partition: use [[partition]] tables");
      if (auto st = apply_partitions(c, *arr, file); !st.ok()) return st;
      continue;
    }
    const auto* t = sv.as_table();
    if (!t) return invalid(fmt::format("{}: {}: expected a [{}] table", file, section, section));
    for (const auto& [k, v] : *t) {
      std::string key(k.str());
      auto where = fmt::format("{}: {}.{}", file, section, key);
      if (auto st = apply_key(c, section, key, v, where); !st.ok()) return st;
    }
  }
  return {};
}

Status apply_override(Config& c, const std::string& ov) {
  auto eq = ov.find('=');
  auto dot = ov.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq)
    return invalid(fmt::format("--set {}: expected section.key=value", ov));
  std::string section = ov.substr(0, dot), key = ov.substr(dot + 1, eq - dot - 1);
  std::string value = ov.substr(eq + 1);
  // Parse the value as TOML when it is one (numbers, booleans), else as a string.
  toml::table t;
  try {
    t = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    t.insert_or_assign("v", value);
  }
  return apply_key(c, section, key, *t.get("v"), "--set " + ov);
}

}  // namespace

Result<Config> load_config(const std::string& path, const std::vector<std::string>& overrides,
                           const std::vector<std::string>& hook_sections) {
  if (path.empty()) return parse_config({}, "", overrides, hook_sections);
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  std::string text;
  constexpr size_t kMaxConfig = 16u << 20;
  text.resize(kMaxConfig + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfig) return invalid(fmt::format("{}: larger than {} bytes", path, kMaxConfig));
  return parse_config(text, path, overrides, hook_sections);
}

Result<Config> parse_config(std::string_view text, const std::string& name, const std::vector<std::string>& overrides,
                            const std::vector<std::string>& hook_sections) {
  Config c;
  for (const auto& s : hook_sections) c.hook_settings[s];
  if (!name.empty()) {
    toml::table root;
    try {
      root = toml::parse(text, name);
    } catch (const toml::parse_error& e) {
      const auto& b = e.source().begin;
      return invalid(fmt::format("{}:{}:{}: {}", name, b.line, b.column, e.description()));
    }
    if (auto st = apply_table(c, root, name); !st.ok()) return st.error();
  }
  for (const auto& ov : overrides)
    if (auto st = apply_override(c, ov); !st.ok()) return st.error();
  int defaults = 0;
  for (const auto& p : c.partitions) defaults += p.is_default ? 1 : 0;
  if (defaults > 1) return invalid("more than one partition has default = true");
  if (!c.partitions.empty() && defaults == 0) c.partitions.front().is_default = true;
  if (auto st = check_steps(c.steps); !st.ok()) return st.error();
  if (c.limits.max_batch_script > c.limits.max_jobspec)
    return invalid(fmt::format("limits.max-batch-script ({} bytes) is larger than limits.max-jobspec ({} bytes)",
                               c.limits.max_batch_script, c.limits.max_jobspec));
  if (c.key_file.empty()) c.key_file = c.state_dir + "/cluster.key";
  return c;
}

}  // namespace corral::ctld
