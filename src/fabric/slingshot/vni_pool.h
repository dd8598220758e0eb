// The controller's pool of VNIs: a QuarantinePool (util/quarantine_pool.h) whose ids are
// VNIs, created from the [slingshot] vni-pool setting.
#pragma once

#include <string_view>

#include "util/quarantine_pool.h"
#include "util/result.h"

namespace corral::fabric::slingshot {

using VniPool = QuarantinePool;

// `idset` is RFC 22 ("1024-65535"). Errors: empty, VNIs above 65535, or 1 / 10 (the
// default CXI service's VNIs) in the set.
Result<VniPool> make_vni_pool(std::string_view idset);

}  // namespace corral::fabric::slingshot
