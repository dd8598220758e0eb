#include "job/mpi_kind.h"

#include <array>
#include <cstdio>

#include "job/hmac_key.h"

namespace corral::job {

namespace {
constexpr std::array<std::string_view, 5> kNames = {"auto", "pmix", "pmi2", "pmi1", "none"};
}  // namespace

Result<std::string> check_mpi_name(std::string_view name, std::string_view where) {
  if (name == "pmi") return std::string("pmi1");
  for (auto n : kNames)
    if (name == n) return std::string(n);
  std::string shown(name.substr(0, 64));
  if (name == "cray-pals" || name == "cray_shasta")
    return invalid(std::string(where) + ": '" + shown +
                   "': Cray PALS is not served by this version of corral (auto, pmix, pmi2, pmi1, none)");
  return invalid(std::string(where) + ": '" + shown + "' is not an MPI type (auto, pmix, pmi2, pmi1, none)");
}

Result<std::string> pmix_namespace_name(const std::string& what) {
  auto nonce = random_nonce();
  if (!nonce) return nonce.error();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(*nonce));
  return "corral." + what + "." + hex;
}

std::string job_mpi_name(const std::string& own, const std::string& site_default) {
  if (!own.empty()) return own;
  auto def = check_mpi_name(site_default, "mpi-default");
  return def ? *def : "auto";
}

MpiService mpi_service(std::string_view name) {
  if (name == "pmix") return MpiService::pmix;
  if (name == "none") return MpiService::none;
  return MpiService::pmi;
}

}  // namespace corral::job
