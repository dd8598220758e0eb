// Step credentials as an agent receives them in a launch request.
#include "fuzz_target.h"
#include "job/step_cred.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  corral::job::VerifyPolicy policy;
  policy.now = 1700000000;
  policy.node = "n1";
  (void)corral::job::verify_step_cred(fuzz_text(data, size), "0123456789abcdef0123456789abcdef", policy);
  (void)corral::job::verify_step_cred_with_cluster_key(fuzz_text(data, size), "cluster-key-for-fuzzing", policy);
  return 0;
}
