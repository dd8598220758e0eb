// A client's connection to a daemon's Unix socket, for the protocols written without gRPC
// (net/step_frames.h, net/rpc_frames.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "util/result.h"
#include "util/unique_fd.h"

namespace corral::net {

// A close-on-exec stream socket connected to `path`. Errors are Errc::unavailable with
// the reason in a few lowercase words ("no such file or directory", "connection refused",
// "the socket path is 120 bytes long, longer than a Unix socket address holds (107)").
Result<UniqueFd> connect_unix(const std::string& path);
// strerror's words as gRPC's messages give them, for errors on such a connection.
std::string errno_words(int err);
// The socket path of a "unix:PATH" (or "unix:///PATH") address, for a client that speaks
// corral's own protocol there, unless the environment variable `transport_env` says
// "grpc"; nullopt for other addresses (TCP: gRPC).
std::optional<std::string> own_protocol_socket(std::string_view address, const char* transport_env);
// True for a target reached over the network ("HOST:PORT", "ipv4:..."), false for "unix:".
bool over_network(std::string_view target);

}  // namespace corral::net
