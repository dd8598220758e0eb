// A daemon's Unix socket serving several protocols (net/peer_listener.h): each connection
// goes to the handler of the preface it begins with, whatever pieces the preface comes
// in, and everything else to gRPC.
#include "net/peer_listener.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <thread>

#include "agent.grpc.pb.h"
#include "net/unix_connect.h"

namespace corral::net {
namespace {

class PeerListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("corral-pl-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "s.sock").string();
    auto l = PeerListener::open(path_, 1024);
    ASSERT_TRUE(l) << l.message();
    listener_ = std::move(*l);
    for (const char* preface : {"CORRAL-RPC/1\n", "CORRAL-AGENT/1\n"}) {
      listener_->divert(preface, [this, preface](UniqueFd fd, const PeerCred& cred) {
        char buf[64] = {};
        pollfd p{fd.get(), POLLIN, 0};
        ::poll(&p, 1, 1000);  // the rest may come a piece later
        const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);  // what followed the preface
        got_.set_value(std::string(preface) + "|" + std::string(buf, n > 0 ? n : 0) + "|" +
                       std::to_string(cred.uid));
      });
    }
    grpc::ServerBuilder b;
    b.RegisterService(&service_);  // any service: gRPC serves none without one
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_);
    listener_->start(server_.get());
  }
  void TearDown() override {
    listener_->stop();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    listener_.reset();
    std::filesystem::remove_all(dir_);
  }
  // Sends `pieces` with pauses between them; the handler's report, or "" when none came.
  std::string send(std::initializer_list<std::string_view> pieces,
                   std::chrono::milliseconds wait = std::chrono::seconds(2)) {
    got_ = std::promise<std::string>();
    auto fd = connect_unix(path_);
    EXPECT_TRUE(fd) << fd.message();
    for (auto p : pieces) {
      EXPECT_EQ(::send(fd->get(), p.data(), p.size(), MSG_NOSIGNAL), static_cast<ssize_t>(p.size()));
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    auto f = got_.get_future();
    if (f.wait_for(wait) != std::future_status::ready) return "";
    return f.get();
  }

  std::filesystem::path dir_;
  std::string path_;
  std::unique_ptr<PeerListener> listener_;
  v1::Agents::Service service_;
  std::unique_ptr<grpc::Server> server_;
  std::promise<std::string> got_;
};

TEST_F(PeerListenerTest, EachPrefaceGoesToItsOwnHandlerWithWhatFollowed) {
  const std::string uid = std::to_string(::getuid());
  EXPECT_EQ(send({"CORRAL-RPC/1\nabc"}), "CORRAL-RPC/1\n|abc|" + uid);
  EXPECT_EQ(send({"CORRAL-AGENT/1\nxyz"}), "CORRAL-AGENT/1\n|xyz|" + uid);
  // In pieces: "CORRAL-" could begin either, "CORRAL-A" only one.
  EXPECT_EQ(send({"CORRAL-", "AGE", "NT/1\n", "q"}), "CORRAL-AGENT/1\n|q|" + uid);
  EXPECT_EQ(send({"CORR", "AL-RPC/1\nr"}), "CORRAL-RPC/1\n|r|" + uid);
}

TEST_F(PeerListenerTest, AnythingElseGoesToGrpcAndNoHandler) {
  const auto wait = std::chrono::milliseconds(300);
  EXPECT_EQ(send({"CORRAL-STEP/1\n"}, wait), "");
  EXPECT_EQ(send({"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"}, wait), "");
  // The listener still tells the next connection apart.
  EXPECT_EQ(send({"CORRAL-AGENT/1\nok"}), "CORRAL-AGENT/1\n|ok|" + std::to_string(::getuid()));
}

}  // namespace
}  // namespace corral::net
