#include "job/port_range.h"

#include <algorithm>
#include <charconv>

namespace corral::job {
namespace {

constexpr uint32_t kMinPort = 1024;  // below are privileged, well-known services
constexpr uint32_t kMaxPort = 65535;

Error unavailable(std::string msg) { return {Errc::unavailable, std::move(msg)}; }

Result<uint16_t> parse_port(std::string_view s, std::string_view whole) {
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  const std::string where = "port range \"" + std::string(whole) + "\": ";
  if (s.empty() || ec == std::errc::invalid_argument || end != s.data() + s.size())
    return invalid(where + "\"" + std::string(s) + "\" is not a port number");
  if (ec == std::errc::result_out_of_range || v > kMaxPort)
    return invalid(where + "port " + std::string(s) + " is above " + std::to_string(kMaxPort));
  if (v < kMinPort)
    return invalid(where + "port " + std::string(s) + " is below " + std::to_string(kMinPort) +
                   " (privileged ports are not handed out)");
  return static_cast<uint16_t>(v);
}

}  // namespace

Result<PortRange> PortRange::parse(std::string_view text) {
  auto dash = text.find('-');
  auto first = parse_port(text.substr(0, dash), text);
  if (!first) return first.error();
  if (dash == std::string_view::npos) return PortRange{*first, *first};
  auto last = parse_port(text.substr(dash + 1), text);
  if (!last) return last.error();
  if (*last < *first) return invalid("port range \"" + std::string(text) + "\": it ends before it starts");
  return PortRange{*first, *last};
}

std::string PortRange::encode() const {
  if (first == last) return std::to_string(first);
  return std::to_string(first) + "-" + std::to_string(last);
}

std::string mpi_ports_env(const PortRange& ports) { return std::string(kMpiPortsVar) + "=" + ports.encode(); }

std::string pals_control_ports(const PortRange& block) {
  std::string out = std::to_string(block.first);
  if (block.last > block.first) out += "," + std::to_string(block.first + 1);
  return out;
}

Result<PortRange> PortFreeList::take(uint32_t n) {
  if (n == 0) return invalid("asked for 0 ports; ask for at least one");
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->size() < n) continue;
    PortRange got{it->first, static_cast<uint16_t>(it->first + n - 1)};
    if (got.last == it->last) {
      free_.erase(it);
    } else {
      it->first = static_cast<uint16_t>(got.last + 1);
    }
    return got;
  }
  return unavailable("no " + std::to_string(n) + " contiguous free ports in " + whole_.encode() + " (" +
                     std::to_string(free_count()) + " free in all)");
}

Status PortFreeList::give_back(PortRange block) {
  if (block.last < block.first || !whole_.contains(block))
    return invalid("ports " + block.encode() + " are not part of " + whole_.encode());
  auto next = std::find_if(free_.begin(), free_.end(), [&](const PortRange& f) { return f.first > block.first; });
  bool overlaps_prev = next != free_.begin() && std::prev(next)->last >= block.first;
  bool overlaps_next = next != free_.end() && next->first <= block.last;
  if (overlaps_prev || overlaps_next)
    return invalid("ports " + block.encode() + " of " + whole_.encode() + " are already free");
  auto it = free_.insert(next, block);
  // Merge with neighbours so a large block can be taken again later.
  if (auto after = std::next(it); after != free_.end() && uint32_t{it->last} + 1 == after->first) {
    it->last = after->last;
    free_.erase(after);
  }
  if (it != free_.begin()) {
    auto before = std::prev(it);
    if (uint32_t{before->last} + 1 == it->first) {
      before->last = it->last;
      free_.erase(it);
    }
  }
  return {};
}

uint32_t PortFreeList::free_count() const {
  uint32_t n = 0;
  for (const auto& f : free_) n += f.size();
  return n;
}

Result<PortRange> PortPool::split(uint32_t count_per_share) {
  if (count_per_share > free_.whole().size())
    return invalid("MPI port shares of " + std::to_string(count_per_share) + " ports do not fit the configured range " +
                   free_.whole().encode() + " (" + std::to_string(free_.whole().size()) + " ports)");
  auto got = free_.take(count_per_share);
  if (!got && got.error().code == Errc::unavailable)
    return unavailable("the MPI port range is exhausted: " + got.message());
  return got;
}

Result<PortRange> PortShare::take(uint32_t n) {
  auto got = free_.take(n);
  if (!got && got.error().code == Errc::unavailable && n > free_.whole().size())
    return invalid("the step asks for " + std::to_string(n) + " MPI ports; the job's share " + free_.whole().encode() +
                   " has only " + std::to_string(free_.whole().size()));
  return got;
}

}  // namespace corral::job
