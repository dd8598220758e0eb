// The subcommands of corral-slingshot. Each returns the process exit status:
// 0 done, 1 failed (messages on stdout), 2 bad input (nothing changed), 3 still busy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace corral::fabric::slingshot::tool {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitBusy = 3;

// Where to act: flags override CORRAL_CXI / CORRAL_NODENAME.
struct Target {
  std::string cxi;
  std::string node;
};

struct UseArgs {
  std::string device;
  uint32_t svc = 0;
  uint32_t vni = 0;
  std::string tc;
  std::optional<uint32_t> uid;  // default: the caller's
};

int prolog(const Target& t);
int epilog(const Target& t, double retry_for);
int clean(const Target& t, const std::string& vnis, double retry_for);
int list(const Target& t, bool json);
int use(const Target& t, const UseArgs& a);

}  // namespace corral::fabric::slingshot::tool
