// The agent stream in corral's own frames on corrald's Unix socket (net/agent_frames.h):
// no gRPC threads, HTTP/2 or completion queues between the agent and corrald.
#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "net/agent_frames.h"
#include "net/frame_channel.h"
#include "net/message_limits.h"
#include "net/unix_connect.h"
#include "node/controller_stream.h"

namespace corral::node {

namespace {

class SocketControllerStream final : public ControllerStream {
 public:
  explicit SocketControllerStream(UniqueFd fd) : channel_(std::move(fd), net::kMaxAgentDownMessage) {}

  Proof prove(std::string*, std::string*) override { return Proof::proven; }  // the socket is root's

  bool write(const v1::AgentMessage& msg) override {
    out_.clear();
    msg.SerializeToString(&out_);
    return channel_.write(net::kStepFrameMessage, out_);
  }

  bool read(v1::ControllerMessage* msg) override {
    auto frame = channel_.read();
    if (!frame) {
      if (why_.empty() && frame.error().code != Errc::unavailable) why_ = frame.message();
      return false;
    }
    if (frame->type == net::kStepFrameStatus) {
      auto st = net::parse_step_status(frame->payload);
      why_ = st ? st->message : st.message();
      if (why_.empty()) why_ = "the controller ended the stream";
      return false;
    }
    if (!msg->ParseFromString(frame->payload)) {
      why_ = "the controller sent a message that does not parse";
      return false;
    }
    return true;
  }

  void cancel() override { channel_.shutdown(); }
  std::string finish() override { return why_; }
  bool unheard() const override { return !channel_.heard(); }

 private:
  net::FrameChannel channel_;
  std::string out_;  // the writer's
  std::string why_;  // the reader's
};

}  // namespace

Result<std::unique_ptr<ControllerStream>> open_socket_stream(const std::string& path) {
  auto fd = net::connect_unix(path);
  if (!fd) return fd.error();
  const auto& p = net::kAgentPreface;
  if (::send(fd->get(), p.data(), p.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(p.size()))
    return Error{Errc::unavailable, net::errno_words(errno)};
  return std::unique_ptr<ControllerStream>(std::make_unique<SocketControllerStream>(std::move(*fd)));
}

}  // namespace corral::node
