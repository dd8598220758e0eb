// corrald's [rabbit] section: how the dws hook reaches the Kubernetes API server and the
// state timeouts of docs/admin.md "Rabbit storage (DWS)". Flux's spellings (tc_timeout)
// are accepted beside corral's (tc-timeout).
#pragma once

#include <string>

#include "hook/settings.h"
#include "storage/dws/kube_config.h"
#include "util/result.h"

namespace corral::storage::dws {

struct RabbitConfig {
  bool enabled = false;
  std::string kubeconfig;  // a kubeconfig file; or server + token-file (+ ca-file)
  std::string server, token_file, ca_file;
  std::string ns = "default";            // the namespace of corral's workflows
  std::string api_version = "v1alpha7";  // of dataworkflowservices.github.io
  std::string prefix = "corral-";        // workflow names: <prefix><jobid>
  double tc_timeout = 10;                // TransientCondition longer than this: fatal
  double setup_timeout = 0;              // 0 = none
  double prerun_timeout = 0;
  double postrun_timeout = 0;
  double teardown_after = 0;        // PostRun + DataOut together
  double epilog_timeout = 0;        // the dws-epilog's last resort (abort)
  unsigned min_allocation_gib = 4;  // the smallest allocation per rabbit
  unsigned writers = 4;             // requests (connections) to the API server at once
  unsigned max_directives = 32;     // per job
};

Result<RabbitConfig> parse_rabbit_settings(const hook::Settings& settings);
// The API server, CA and token the configuration names.
Result<KubeConfig> rabbit_kube_config(const RabbitConfig& c);

}  // namespace corral::storage::dws
