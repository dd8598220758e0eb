// NVIDIA UFM as the subnet manager, through its REST interface (docs/admin.md,
// "Infiniband"): POST /ufmRest/resources/pkeys adds GUIDs to a key (creating it),
// POST /ufmRest/actions/remove_guids_from_pkey takes them out, DELETE
// /ufmRest/resources/pkeys/KEY removes a job's key. Basic authentication over HTTPS.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "fabric/infiniband/subnet_manager.h"
#include "http/http_client.h"

namespace corral::fabric::infiniband {

class UfmSubnetManager final : public SubnetManager {
 public:
  explicit UfmSubnetManager(http::HttpOptions opts) : client_(std::move(opts)) {}
  std::string describe() const override;
  Status join(uint16_t pkey, const std::vector<std::string>& guids) override;
  Status leave(uint16_t pkey, const std::vector<std::string>& guids, bool drop) override;
  // GET /ufmRest/app/ufm_version: the release, or why UFM cannot be reached.
  Result<std::string> version();

 private:
  Result<http::HttpReply> call(std::string_view method, const std::string& path, const std::string& body,
                               std::string_view what);
  std::mutex mu_;  // one request at a time on the one connection
  http::HttpClient client_;
};

}  // namespace corral::fabric::infiniband
