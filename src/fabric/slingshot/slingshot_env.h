// The task environment of a job with a VNI reservation (the seed's SLINGSHOT_* variables),
// built from the CXI services the prolog created on this node's NICs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/slingshot/cxi_device.h"
#include "util/result.h"

namespace corral::fabric::slingshot {

// "1024,1025" -> {1024, 1025}. The empty string is the empty list; anything but comma
// separated integers 0-65535 without repeats is an error naming the bad item.
Result<std::vector<uint16_t>> parse_vni_list(std::string_view text);
std::string format_vni_list(const std::vector<uint16_t>& vnis);  // "1024,1025"

// SLINGSHOT_TCS as the seed encodes it: "0x0a" for BEST_EFFORT|LOW_LATENCY.
std::string format_tcs(uint32_t tcs);

// A job's service: not a system service, exactly the job's VNIs, and `uid` a member.
bool is_job_service(const Service& svc, const std::vector<uint16_t>& vnis, uint32_t uid);

// vnis empty: erases SLINGSHOT_VNIS, SLINGSHOT_DEVICES, SLINGSHOT_SVC_IDS and
// SLINGSHOT_TCS, so applications use the default service. Otherwise sets all four from
// the NICs holding the job's service (in NIC order). not_found when the node has NICs
// but none holds the job's service (its prolog did not run or failed).
Status apply_slingshot_env(CxiDevice& dev, const std::vector<uint16_t>& vnis, uint32_t uid,
                           std::map<std::string, std::string>& env);

}  // namespace corral::fabric::slingshot
