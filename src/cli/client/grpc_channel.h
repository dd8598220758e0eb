// gRPC for what corral's own socket protocols do not carry: controllers and step managers
// over TCP, and CORRAL_RPC_TRANSPORT / CORRAL_STEP_TRANSPORT=grpc. Calls are bytes in,
// bytes out; client.cc and step_client.cc (de)serialise and name the errors.
//
// Which implementation a program gets is chosen when it is linked (docs/architecture.md,
// "The corral command without gRPC"):
//   - client/grpc/: gRPC itself (the corral-grpc program, the benchmarks);
//   - client/handoff/: the `corral` command, which links no gRPC, OpenSSL or abseil beyond
//     protobuf's: it runs corral-grpc in its own place (same arguments, same process) the
//     first time it needs a channel, which must be before the command changed anything.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "util/result.h"

namespace corral::cli {

// A call's outcome in gRPC's terms: code 0 is OK, else grpc::StatusCode's numbering.
struct GrpcStatus {
  int code = 0;
  std::string message;
};

// One streaming call. read() is for one thread; write() and writes_done() for one other
// at a time; cancel() from any thread.
class GrpcStream {
 public:
  virtual ~GrpcStream() = default;  // cancels the call if it is still open
  virtual bool read(std::string& message) = 0;
  virtual bool write(std::string_view message) = 0;
  virtual bool writes_done() = 0;
  virtual void cancel() = 0;
  virtual GrpcStatus finish() = 0;  // once read() returned false
};

// Each call to a target over TCP carries a fresh credential (net/credentials.h): MUNGE's
// from munged at $CORRAL_MUNGE_SOCKET (default libmunge's), or corral-authd's with
// CORRAL_AUTH=cluster-key. The error of a call is one that credential could not be made;
// what the call itself came to is its GrpcStatus.
class GrpcChannel {
 public:
  virtual ~GrpcChannel() = default;
  // `method` ("/corral.v1.Controller/Submit") must outlive the call: a string literal.
  virtual Result<GrpcStatus> unary(const char* method, std::string_view request, double deadline_seconds,
                                   std::string* reply) = 0;
  // A server stream that begins with `request` (Watch).
  virtual Result<std::unique_ptr<GrpcStream>> server_stream(const char* method, std::string_view request) = 0;
  // A stream both ways (RunStep).
  virtual Result<std::unique_ptr<GrpcStream>> bidi_stream(const char* method) = 0;
};

// Set for corral-grpc by the handoff build (which refuses to start a second one); the gRPC
// build removes it, so that the jobs it submits do not inherit it.
inline constexpr const char* kHandedOffEnv = "CORRAL_HANDED_OFF";

using Unreachable = std::function<std::string(const std::string& why)>;

// A client's channel to `target`: it fails fast when nobody listens (reconnects after
// 100 ms, at most 1 s apart, instead of backing off for the call's deadline), takes replies
// of any size, and uses TLS trusting $CORRAL_TLS_CA when that is set and the target is on
// the network (net/tls.h). `own_connection`: not shared with other channels of the process.
// No channel but an error when the CA cannot be read, or when the address cannot work (a
// Unix socket path longer than a socket address holds): that one is said through
// `unreachable`. The handoff build does not return when it can run corral-grpc instead.
Result<std::shared_ptr<GrpcChannel>> open_grpc_channel(const std::string& target, bool own_connection,
                                                       const Unreachable& unreachable);

// Called by main once the arguments are parsed, before `command` runs: the handoff build
// runs corral-grpc at once when the controller at `uri` is reached through gRPC (TCP, or
// CORRAL_RPC_TRANSPORT=grpc), and for a command that could need gRPC after it changed
// something (`corral alloc` submits, then opens its shell's step, whose step manager may be
// on another host). A command must not read its standard input before its first call to a
// step manager, which may hand off too. The gRPC build only clears kHandedOffEnv.
void hand_off_before(std::string_view command, const std::string& uri);

}  // namespace corral::cli
