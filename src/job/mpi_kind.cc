#include "job/mpi_kind.h"

#include <array>
#include <cstdio>

#include "job/hmac_key.h"

namespace corral::job {

namespace {
constexpr std::array<std::string_view, 6> kNames = {"auto", "pmix", "pmi2", "pmi1", "cray-pals", "none"};
}  // namespace

Result<std::string> check_mpi_name(std::string_view name, std::string_view where) {
  if (name == "pmi") return std::string("pmi1");
  if (name == "cray_shasta") return std::string("cray-pals");  // Slurm's name for it
  for (auto n : kNames)
    if (name == n) return std::string(n);
  std::string shown(name.substr(0, 64));
  return invalid(std::string(where) + ": '" + shown + "' is not an MPI type (auto, pmix, pmi2, pmi1, cray-pals, none)");
}

Result<std::string> pmix_namespace_name(const std::string& what) {
  auto nonce = random_nonce();
  if (!nonce) return nonce.error();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(*nonce));
  return "corral." + what + "." + hex;
}

Result<std::string> pals_secret() {
  auto nonce = random_nonce();
  if (!nonce) return nonce.error();
  return std::to_string(*nonce);
}

std::string job_mpi_name(const std::string& own, const std::string& site_default) {
  if (!own.empty()) return own;
  auto def = check_mpi_name(site_default, "mpi-default");
  return def ? *def : "auto";
}

MpiService mpi_service(std::string_view name) {
  if (name == "pmix") return MpiService::pmix;
  if (name == "none") return MpiService::none;
  if (name == "cray-pals") return MpiService::cray_pals;
  return MpiService::pmi;
}

}  // namespace corral::job
