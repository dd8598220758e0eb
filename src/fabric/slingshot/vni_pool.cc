#include "fabric/slingshot/vni_pool.h"

namespace corral::fabric::slingshot {

Result<VniPool> make_vni_pool(std::string_view idset) {
  auto pool = QuarantinePool::create(idset, "vni-pool", "VNI");
  if (!pool) return pool.error();
  if (pool->pool().contains(1) || pool->pool().contains(10))
    return invalid("vni-pool: VNIs 1 and 10 are the default service's and cannot be in the pool");
  return pool;
}

}  // namespace corral::fabric::slingshot
