#include "node/exec/hardware.h"

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <set>

namespace corral::node {

namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

uint32_t count_gpus(hwloc_topology_t topo) {
  std::set<const void*> devices;
  for (hwloc_obj_t obj = hwloc_get_next_osdev(topo, nullptr); obj != nullptr; obj = hwloc_get_next_osdev(topo, obj)) {
    auto type = obj->attr->osdev.type;
    if (type != HWLOC_OBJ_OSDEV_GPU && type != HWLOC_OBJ_OSDEV_COPROC) continue;
    // Several OS devices (drm card, render node, CUDA, OpenCL) may describe one GPU;
    // their common PCI parent identifies it.
    devices.insert(obj->parent != nullptr ? static_cast<const void*>(obj->parent) : obj);
  }
  return static_cast<uint32_t>(devices.size());
}

}  // namespace

std::string short_hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  std::string name(buf);
  if (auto dot = name.find('.'); dot != std::string::npos) name.resize(dot);
  return name;
}

Result<NodeHardware> discover_hardware() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return io_error("hwloc: cannot initialise the topology");
  Topology topo(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(raw) != 0) return io_error("hwloc: cannot load this machine's topology");

  NodeHardware hw;
  hw.name = short_hostname();
  hwloc_obj_type_t unit = HWLOC_OBJ_CORE;
  int cores = hwloc_get_nbobjs_by_type(raw, unit);
  if (cores <= 0) cores = hwloc_get_nbobjs_by_type(raw, unit = HWLOC_OBJ_PU);
  hw.cores = cores > 0 ? static_cast<uint32_t>(cores) : 1;
  for (int i = 0; i < cores; ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(raw, unit, static_cast<unsigned>(i));
    std::vector<int> pus;
    for (int pu = core != nullptr ? hwloc_bitmap_first(core->cpuset) : -1; pu >= 0;
         pu = hwloc_bitmap_next(core->cpuset, pu))
      pus.push_back(pu);
    hw.core_cpus.push_back(std::move(pus));
  }
  // The kernel's MemTotal: hwloc sums NUMA nodes, which misses memory some VMs hot-plug
  // outside of them.
  long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGESIZE);
  hwloc_obj_t root = hwloc_get_root_obj(raw);
  uint64_t hwloc_bytes = root != nullptr ? root->total_memory : 0;
  uint64_t kernel_bytes =
      pages > 0 && page_size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) : 0;
  hw.memory_mb = std::max(hwloc_bytes, kernel_bytes) / (1024 * 1024);
  hw.gpus = count_gpus(raw);
  return hw;
}

}  // namespace corral::node
