#include "net/authd_wire.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "net/big_endian.h"
#include "util/read_exactly.h"
#include "util/unique_fd.h"

namespace corral::net {

namespace {

// send(2), not write(2): a corral-authd that closes early must not kill the client with SIGPIPE.
bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

Error down(const std::string& socket, const std::string& why) {
  return Error{
      Errc::unavailable,
      fmt::format("cluster-key credential from corral-authd at {}: {} (is corral-authd running?)", socket, why)};
}

}  // namespace

std::string encode_authd_request(const AuthdRequest& req) {
  std::string out(kAuthdMagic);
  put_be(out, req.restrict_uid ? 1 : 0, 1);
  put_be(out, req.restrict_uid.value_or(0), 4);
  put_be(out, req.payload.size(), 2);
  out += req.payload;
  return out;
}

Result<size_t> authd_payload_length(std::string_view header) {
  if (header.size() != kAuthdRequestHeader || header.substr(0, kAuthdMagic.size()) != kAuthdMagic)
    return invalid("not a corral-authd request");
  const size_t n = get_be(header, kAuthdRequestHeader - 2, 2);
  if (n > kAuthdMaxPayload) return invalid("the payload is at most 1024 bytes");
  return n;
}

AuthdRequest decode_authd_request(std::string_view whole) {
  AuthdRequest req;
  if (get_be(whole, kAuthdMagic.size(), 1) != 0)
    req.restrict_uid = static_cast<uint32_t>(get_be(whole, kAuthdMagic.size() + 1, 4));
  req.payload = std::string(whole.substr(kAuthdRequestHeader));
  return req;
}

std::string encode_authd_answer(bool ok, std::string_view text) {
  std::string out;
  put_be(out, ok ? 0 : 1, 1);
  text = text.substr(0, 0xffff);
  put_be(out, text.size(), 2);
  out += text;
  return out;
}

Result<std::string> authd_sign(const std::string& socket, const AuthdRequest& req) {
  if (req.payload.size() > kAuthdMaxPayload) return invalid("a credential's payload is at most 1024 bytes");
  sockaddr_un addr{};
  if (socket.size() >= sizeof(addr.sun_path)) return invalid("corral-authd's socket path is too long: " + socket);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return down(socket, std::strerror(errno));
  timeval limit{10, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket.c_str(), socket.size() + 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return down(socket, std::strerror(errno));
  if (!send_all(fd.get(), encode_authd_request(req))) return down(socket, "the request could not be sent");
  std::string answer;
  if (!read_exactly(fd.get(), answer, kAuthdAnswerHeader)) return down(socket, "no answer");
  const size_t n = get_be(answer, 1, 2);
  if (!read_exactly(fd.get(), answer, n)) return down(socket, "a cut-off answer");
  std::string text = answer.substr(kAuthdAnswerHeader);
  if (answer[0] != 0) return denied(fmt::format("corral-authd at {} refused to sign: {}", socket, text));
  return text;
}

}  // namespace corral::net
