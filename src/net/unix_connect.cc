#include "net/unix_connect.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace corral::net {

std::string errno_words(int err) {
  std::string r = std::strerror(err);
  if (!r.empty()) r[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(r[0])));
  return r;
}

std::optional<std::string> own_protocol_socket(std::string_view address, const char* transport_env) {
  if (!address.starts_with("unix:")) return std::nullopt;
  const char* transport = std::getenv(transport_env);
  if (transport != nullptr && std::string_view(transport) == "grpc") return std::nullopt;
  address.remove_prefix(5);
  if (address.starts_with("///")) address.remove_prefix(2);
  return std::string(address);
}

namespace {

Error unavailable_errno(int err) { return {Errc::unavailable, errno_words(err)}; }

}  // namespace

Result<UniqueFd> connect_unix(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path)
    return Error{Errc::unavailable, "the socket path is " + std::to_string(path.size()) +
                                        " bytes long, longer than a Unix socket address holds (" +
                                        std::to_string(sizeof addr.sun_path - 1) + ")"};
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return unavailable_errno(errno);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return unavailable_errno(errno);
  return fd;
}

bool over_network(std::string_view target) { return target.rfind("unix:", 0) != 0; }

}  // namespace corral::net
