// The controller's calls without gRPC (net/rpc_frames.h): RpcSocketServer against a
// test controller (unary calls and watches), through raw frames and through the command's RpcSocketClient, and the
// limits a hostile client meets.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "cli/client/rpc_socket_client.h"
#include "client.pb.h"
#include "ctld/rpc_socket.h"
#include "ctld/rpc_socket_calls.h"
#include "ctld_test_controller.h"
#include "net/rpc_frames.h"
#include "temp_dir.h"

namespace corral::ctld {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kAlice = 12345;

struct Reply {
  int code = -1;  // -1: the connection closed first
  std::string message;
  std::string body;
};

std::string call_frame(net::RpcMethod m, std::string_view request) {
  std::string out;
  net::append_step_frame(out, net::kStepFrameMessage, net::rpc_call_payload(m, request));
  return out;
}

void send_all(int fd, std::string_view data) {
  ASSERT_EQ(::send(fd, data.data(), data.size(), MSG_NOSIGNAL), static_cast<ssize_t>(data.size()));
}

// Reads one answer (up to its status frame) within `seconds`.
Reply read_answer(int fd, net::StepFrameReader& reader, double seconds = 5) {
  Reply r;
  for (;;) {
    auto f = reader.next();
    if (!f || !*f) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(seconds * 1000)) <= 0) return r;
      char buf[65536];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return r;
      reader.feed(std::string_view(buf, static_cast<size_t>(n)));
      continue;
    }
    if ((*f)->type == net::kStepFrameMessage) {
      r.body = (*f)->payload;
      continue;
    }
    auto st = net::parse_step_status((*f)->payload);
    r.code = st ? st->code : -2;
    r.message = st ? st->message : "";
    return r;
  }
}

// A listening Unix socket at `path` (invalid on failure).
UniqueFd listen_unix(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, path.c_str());
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd.get(), 8) != 0) return {};
  return fd;
}

// True when the peer closed `fd` within `seconds`.
bool closed_within(int fd, double seconds) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(seconds * 1000)) <= 0) return false;
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

class RpcSocketTest : public ::testing::Test {
 protected:
  RpcSocketTest() { spdlog::set_level(spdlog::level::warn); }
  void SetUp() override {
    ctl_ = test::start_test_controller(dir_, test::test_config(dir_));
    ASSERT_TRUE(ctl_);
  }
  void serve(RpcSocketServer::Limits limits = {}, RpcSocketServer::Dispatch dispatch = {}) {
    if (limits.max_request == 0) limits.max_request = 1 << 20;
    if (!dispatch)
      dispatch = [this](const Caller& c, net::RpcMethod m, std::string_view request, std::string* reply) {
        return call_controller(*ctl_, c, m, request, reply);
      };
    auto watch = [this](const Caller& c, std::string_view request, WatchSink& sink) {
      return watch_controller(*ctl_, c, request, sink);
    };
    auto s = RpcSocketServer::start(std::move(dispatch), std::move(watch), limits);
    ASSERT_TRUE(s.ok()) << s.message();
    server_ = std::move(*s);
  }
  // A connection of `uid` as the listener hands it over (the preface read); the test's end.
  UniqueFd connect_as(uint32_t uid) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    server_->adopt(UniqueFd(sv[0]), Caller{uid, uid});
    return UniqueFd(sv[1]);
  }

  test::TempDir dir_;
  std::unique_ptr<Controller> ctl_;
  std::unique_ptr<RpcSocketServer> server_;
};

TEST_F(RpcSocketTest, AnswersAsTheConnectionsUserAndKeepsTheConnectionForMoreCalls) {
  serve();
  UniqueFd fd = connect_as(kAlice);
  net::StepFrameReader reader(1 << 20);
  // Two calls in one write: both are answered, in order.
  send_all(fd.get(), call_frame(net::RpcMethod::ping, "") + call_frame(net::RpcMethod::ping, ""));
  for (int i = 0; i < 2; ++i) {
    Reply r = read_answer(fd.get(), reader);
    ASSERT_EQ(r.code, 0) << r.message;
    v1::PingReply ping;
    ASSERT_TRUE(ping.ParseFromString(r.body));
    EXPECT_EQ(ping.your_uid(), kAlice);
  }
}

TEST_F(RpcSocketTest, RefusesWhatIsNotACallWithAReason) {
  serve();
  net::StepFrameReader reader(1 << 20);
  {
    UniqueFd fd = connect_as(kAlice);
    send_all(fd.get(), call_frame(static_cast<net::RpcMethod>(99), ""));
    Reply r = read_answer(fd.get(), reader);
    EXPECT_EQ(r.code, 12);  // UNIMPLEMENTED; the connection stays
    EXPECT_THAT(r.message, HasSubstr("unknown method"));
    send_all(fd.get(), call_frame(net::RpcMethod::submit, "\xff\xff"));
    r = read_answer(fd.get(), reader);
    EXPECT_EQ(r.code, 3);
    EXPECT_THAT(r.message, HasSubstr("malformed request: not a valid SubmitRequest"));
  }
  {
    UniqueFd fd = connect_as(kAlice);
    send_all(fd.get(), std::string("\x07\0\0\0\0", 5));
    Reply r = read_answer(fd.get(), reader);
    EXPECT_EQ(r.code, 3);
    EXPECT_THAT(r.message, HasSubstr("unknown frame type 7"));
    EXPECT_TRUE(closed_within(fd.get(), 5));
  }
  {
    UniqueFd fd = connect_as(kAlice);
    std::string status;
    net::append_step_frame(status, net::kStepFrameStatus, "\0");
    send_all(fd.get(), status);
    EXPECT_THAT(read_answer(fd.get(), reader).message, HasSubstr("a client sends only call frames"));
  }
  {
    UniqueFd fd = connect_as(kAlice);
    send_all(fd.get(), std::string("\x01\xff\xff\xff\xff", 5));
    Reply r = read_answer(fd.get(), reader);
    EXPECT_EQ(r.code, 3);
    EXPECT_THAT(r.message, HasSubstr("over the limit of 1048576"));
  }
}

TEST_F(RpcSocketTest, AUsersConnectionsAreLimitedButRootsAreNot) {
  serve({.per_user = 2});
  UniqueFd a = connect_as(kAlice), b = connect_as(kAlice), c = connect_as(kAlice);
  net::StepFrameReader reader(1 << 20);
  Reply r = read_answer(c.get(), reader);
  EXPECT_EQ(r.code, 8);  // RESOURCE_EXHAUSTED
  EXPECT_THAT(r.message, HasSubstr("too many connections from uid 12345"));
  UniqueFd roots[3] = {connect_as(0), connect_as(0), connect_as(0)};
  for (auto& fd : roots) {
    send_all(fd.get(), call_frame(net::RpcMethod::ping, ""));
    EXPECT_EQ(read_answer(fd.get(), reader).code, 0);
  }
  // A closed connection gives its place back.
  a.reset();
  for (int i = 0; i < 100; ++i) {
    UniqueFd d = connect_as(kAlice);
    send_all(d.get(), call_frame(net::RpcMethod::ping, ""));
    if (read_answer(d.get(), reader).code == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "a closed connection's place was not given back";
}

TEST_F(RpcSocketTest, BytesOfUnfinishedCallsAreLimitedPerUser) {
  serve({.max_request = 1 << 20, .per_user_bytes = 1 << 20});
  UniqueFd a = connect_as(kAlice), b = connect_as(kAlice);
  // Two calls of 0.75 MiB each, each only begun: together over the user's 1 MiB.
  std::string header("\x01\x00\x0c\x00\x00", 5);
  const std::string part = header + std::string(700 << 10, 'x');
  send_all(a.get(), part);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::thread writer([&] { (void)!::send(b.get(), part.data(), part.size(), MSG_NOSIGNAL); });
  net::StepFrameReader reader(1 << 20);
  Reply r = read_answer(b.get(), reader);
  writer.join();
  EXPECT_EQ(r.code, 8);
  EXPECT_THAT(r.message, HasSubstr("more than 1048576 bytes of calls at once"));
}

TEST_F(RpcSocketTest, IdleConnectionsAndUnfinishedCallsAreClosed) {
  serve({.idle_seconds = 0.3, .partial_seconds = 0.3, .sweep_seconds = 0.05});
  UniqueFd idle = connect_as(kAlice), partial = connect_as(kAlice), busy = connect_as(kAlice);
  send_all(partial.get(), std::string("\x01\x00\x00\x01\x00", 5));  // a 256-byte call, never finished
  // A connection that keeps calling stays open past the idle time.
  net::StepFrameReader reader(1 << 20);
  for (int i = 0; i < 8; ++i) {
    send_all(busy.get(), call_frame(net::RpcMethod::ping, ""));
    EXPECT_EQ(read_answer(busy.get(), reader).code, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(closed_within(idle.get(), 0.1));
  EXPECT_TRUE(closed_within(partial.get(), 0.1));
  EXPECT_TRUE(closed_within(busy.get(), 5));  // once it stops calling
}

TEST_F(RpcSocketTest, AClientThatStopsReadingItsAnswersIsClosed) {
  serve({.idle_seconds = 0.3, .sweep_seconds = 0.05});
  UniqueFd fd = connect_as(kAlice);
  // Calls, never reading an answer, until corrald stops reading them (its answers fill
  // the socket), then nothing.
  const std::string ping = call_frame(net::RpcMethod::ping, "");
  std::string many;
  for (int i = 0; i < 4096; ++i) many += ping;
  size_t sent = 0;
  for (int stalls = 0; stalls < 20;) {
    const ssize_t n = ::send(fd.get(), many.data(), many.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      stalls = 0;
    } else {
      ++stalls;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ASSERT_GT(sent, 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  // What was answered before the stall is there to read; the rest never is: corrald gave
  // up on the connection instead of answering once the client came back.
  net::StepFrameReader reader(1 << 20);
  size_t answers = 0;
  for (;;) {
    pollfd p{fd.get(), POLLIN, 0};
    ASSERT_GT(::poll(&p, 1, 5000), 0) << "neither an answer nor the end";
    char buf[65536];
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) break;
    reader.feed(std::string_view(buf, static_cast<size_t>(n)));
    for (auto f = reader.next(); f.ok() && *f; f = reader.next()) answers += (*f)->type == net::kStepFrameStatus;
  }
  EXPECT_LT(answers, sent / ping.size());
}

TEST_F(RpcSocketTest, OneUsersSlowCallsDoNotHoldUpAnotherUsersCall) {
  constexpr uint32_t kBob = 12346;
  std::mutex mu;
  std::condition_variable cv;
  int may_finish = 0;  // how many more of Alice's calls may end
  std::atomic<int> alice_running{0};
  serve({.threads = 2}, [&](const Caller& c, net::RpcMethod, std::string_view, std::string* reply) {
    if (c.uid == kAlice) {
      ++alice_running;
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return may_finish > 0; });
      --may_finish;
    }
    *reply = std::to_string(c.uid);
    return Status();
  });
  auto let_alice_finish = [&](int n) {
    {
      std::lock_guard lock(mu);
      may_finish += n;
    }
    cv.notify_all();
  };
  // Alice queues eight calls from eight connections (two run, on both threads), then Bob
  // calls once. When one of hers ends, the free thread is Bob's turn, not her third call.
  std::vector<UniqueFd> alice;
  for (int i = 0; i < 8; ++i) {
    alice.push_back(connect_as(kAlice));
    send_all(alice.back().get(), call_frame(net::RpcMethod::ping, ""));
  }
  for (int i = 0; i < 500 && alice_running.load() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(alice_running.load(), 2);
  UniqueFd bob = connect_as(kBob);
  send_all(bob.get(), call_frame(net::RpcMethod::ping, ""));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // Bob's call is queued
  let_alice_finish(1);
  net::StepFrameReader reader(1 << 20);
  Reply r = read_answer(bob.get(), reader, 5);
  let_alice_finish(100);
  ASSERT_EQ(r.code, 0) << "Bob's call waited behind Alice's";
  EXPECT_EQ(r.body, std::to_string(kBob));
  for (auto& fd : alice) {
    net::StepFrameReader ar(1 << 20);
    EXPECT_EQ(read_answer(fd.get(), ar).code, 0);
  }
}

TEST_F(RpcSocketTest, AnswersNotYetReadAreLimitedPerUser) {
  // Answers of 1 MiB, 1.5 MiB of them unread per user; one of 3 MiB is too big at all.
  serve({.per_user_answers = 3 << 19, .max_answer = 2 << 20},
        [](const Caller&, net::RpcMethod m, std::string_view, std::string* reply) {
          reply->assign(m == net::RpcMethod::ping ? (1 << 20) : (3 << 20), 'x');
          return Status();
        });
  UniqueFd first = connect_as(kAlice), second = connect_as(kAlice);
  send_all(first.get(), call_frame(net::RpcMethod::ping, ""));  // not read yet
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  send_all(second.get(), call_frame(net::RpcMethod::ping, ""));
  net::StepFrameReader reader(4 << 20);
  Reply r = read_answer(second.get(), reader);
  EXPECT_EQ(r.code, 8);
  EXPECT_THAT(r.message, HasSubstr("bytes of answers from corrald not yet read"));
  net::StepFrameReader first_reader(4 << 20);
  r = read_answer(first.get(), first_reader);  // read: the next call is answered
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(r.body.size(), 1u << 20);
  send_all(second.get(), call_frame(net::RpcMethod::ping, ""));
  r = read_answer(second.get(), reader);
  EXPECT_EQ(r.code, 0) << r.message;
  send_all(second.get(), call_frame(net::RpcMethod::list_jobs, ""));
  r = read_answer(second.get(), reader);
  EXPECT_EQ(r.code, 8);
  EXPECT_THAT(r.message, HasSubstr("over corrald's limit of 2097152"));
}

TEST_F(RpcSocketTest, TheCommandsClientCallsThroughASocketAndReusesItsConnection) {
  serve();
  // A listener as corrald's: reads the preface, then hands the connection over.
  const std::string path = dir_.str() + "/ctld.sock";
  UniqueFd listener = listen_unix(path);
  ASSERT_TRUE(listener.valid());
  std::atomic<int> accepted{0};
  std::thread acceptor([&] {
    for (;;) {
      UniqueFd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!fd.valid()) return;
      char preface[net::kRpcPreface.size()];
      if (::recv(fd.get(), preface, sizeof preface, MSG_WAITALL) != static_cast<ssize_t>(sizeof preface)) return;
      ++accepted;
      server_->adopt(std::move(fd), Caller{kAlice, kAlice});
    }
  });
  cli::RpcSocketClient client(path, 1 << 20);
  for (int i = 0; i < 3; ++i) {
    auto a = client.call(net::RpcMethod::ping, "", 5);
    ASSERT_TRUE(a.ok()) << a.message();
    EXPECT_EQ(a->code, 0);
    v1::PingReply ping;
    ASSERT_TRUE(ping.ParseFromString(a->reply));
    EXPECT_EQ(ping.your_uid(), kAlice);
  }
  v1::GetJobRequest get;
  get.set_jobid(424242);
  auto a = client.call(net::RpcMethod::get_job, get.SerializeAsString(), 5);
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->code, 5) << a->message;  // NOT_FOUND, said on the same connection
  EXPECT_EQ(accepted.load(), 1);
  ::shutdown(listener.get(), SHUT_RDWR);
  acceptor.join();
}

// Reads WatchReply frames until one carries `event` of `jobid`, or the status frame.
bool read_until_event(int fd, net::StepFrameReader& reader, uint64_t jobid, const std::string& event, Reply* end) {
  for (;;) {
    auto f = reader.next();
    if (!f || !*f) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) return false;
      char buf[65536];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      reader.feed(std::string_view(buf, static_cast<size_t>(n)));
      continue;
    }
    if ((*f)->type != net::kStepFrameMessage) {
      auto st = net::parse_step_status((*f)->payload);
      end->code = st ? st->code : -2;
      end->message = st ? st->message : "";
      return false;
    }
    v1::WatchReply rep;
    EXPECT_TRUE(rep.ParseFromString((*f)->payload));
    for (const auto& item : rep.items())
      if (item.has_event() && item.event().jobid() == jobid && item.event().name() == event) return true;
  }
}

// A job that waits behind another that holds the test node's 4 cores: pending, it can be
// cancelled at once. Its id; 0 with a failure.
uint64_t pending_job(Controller& ctl) {
  job::JobRequest r;
  r.command = {"true"};
  r.exclusive = true;
  r.nnodes = 1;
  if (test::submit_job(ctl, r) == 0) return 0;
  return test::submit_job(ctl, r);
}

std::string watch_request(uint64_t jobid) {
  v1::WatchRequest req;
  req.add_jobids(jobid);
  req.set_history(true);
  req.set_until_inactive(true);
  return req.SerializeAsString();
}

TEST_F(RpcSocketTest, AWatchStreamsAJobsEventsAndEndsWithAStatusWhenItEnds) {
  serve();
  auto agent = test::register_one_node(*ctl_);
  const uint64_t id = pending_job(*ctl_);
  ASSERT_NE(id, 0u);
  UniqueFd fd = connect_as(0);
  net::StepFrameReader reader(1 << 20);
  send_all(fd.get(), call_frame(net::RpcMethod::watch, watch_request(id)));
  Reply end;
  ASSERT_TRUE(read_until_event(fd.get(), reader, id, "submit", &end)) << end.message;  // replayed
  v1::CancelRequest cancel;
  cancel.add_jobids(id);
  v1::CancelReply cancelled;
  ASSERT_TRUE(ctl_->cancel(Caller{0, 0}, cancel, &cancelled).ok());
  EXPECT_FALSE(read_until_event(fd.get(), reader, id, "no-such-event", &end));
  EXPECT_EQ(end.code, 0) << end.message;  // the job is inactive: the watch is over
  EXPECT_TRUE(closed_within(fd.get(), 5));

  // Another user's watch of a job that does not exist: refused with the reason.
  UniqueFd other = connect_as(kAlice);
  net::StepFrameReader other_reader(1 << 20);
  send_all(other.get(), call_frame(net::RpcMethod::watch, watch_request(424242)));
  Reply refused = read_answer(other.get(), other_reader);
  EXPECT_NE(refused.code, 0);
  EXPECT_FALSE(refused.message.empty());
}

TEST_F(RpcSocketTest, WatchesAreLimitedAndAHungUpWatchGivesItsPlaceBack) {
  RpcSocketServer::Limits limits;
  limits.watches = 1;
  serve(limits);
  auto agent = test::register_one_node(*ctl_);
  const uint64_t id = test::submit_command(*ctl_, {"true"});
  ASSERT_NE(id, 0u);
  UniqueFd first = connect_as(kAlice);
  net::StepFrameReader first_reader(1 << 20);
  send_all(first.get(), call_frame(net::RpcMethod::watch, watch_request(id)));
  Reply end;
  ASSERT_TRUE(read_until_event(first.get(), first_reader, id, "submit", &end)) << end.message;

  UniqueFd second = connect_as(kAlice);
  net::StepFrameReader second_reader(1 << 20);
  send_all(second.get(), call_frame(net::RpcMethod::watch, watch_request(id)));
  Reply refused = read_answer(second.get(), second_reader);
  EXPECT_EQ(refused.code, 8);  // RESOURCE_EXHAUSTED
  EXPECT_THAT(refused.message, HasSubstr("at most 1 watches at once"));

  first.reset();  // hung up: its thread notices within a subscription's wait and ends
  bool taken = false;
  for (int i = 0; i < 50 && !taken; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    UniqueFd again = connect_as(kAlice);
    net::StepFrameReader reader(1 << 20);
    send_all(again.get(), call_frame(net::RpcMethod::watch, watch_request(id)));
    taken = read_until_event(again.get(), reader, id, "submit", &end);
  }
  EXPECT_TRUE(taken) << "the hung-up watch still held the only place";
}

TEST_F(RpcSocketTest, AWatchAsksForAValidRequestAndTheServerStopsWithWatchesOpen) {
  serve();
  UniqueFd bad = connect_as(kAlice);
  net::StepFrameReader reader(1 << 20);
  send_all(bad.get(), call_frame(net::RpcMethod::watch, "\xff\xff"));
  Reply r = read_answer(bad.get(), reader);
  EXPECT_EQ(r.code, 3);  // INVALID_ARGUMENT
  EXPECT_THAT(r.message, HasSubstr("not a valid WatchRequest"));

  auto agent = test::register_one_node(*ctl_);
  const uint64_t id = test::submit_command(*ctl_, {"true"});
  UniqueFd open = connect_as(0);
  net::StepFrameReader open_reader(1 << 20);
  send_all(open.get(), call_frame(net::RpcMethod::watch, watch_request(id)));
  Reply end;
  ASSERT_TRUE(read_until_event(open.get(), open_reader, id, "submit", &end));
  const auto t0 = std::chrono::steady_clock::now();
  server_.reset();  // joins the watch's thread
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
}

TEST(RpcSocketClientTest, SaysWhyCorraldCannotBeReachedOrDoesNotAnswer) {
  test::TempDir dir;
  cli::RpcSocketClient missing(dir.str() + "/none.sock", 1 << 20);
  auto a = missing.call(net::RpcMethod::ping, "", 1);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().code, Errc::unavailable);
  EXPECT_EQ(a.message(), "no such file or directory");

  const std::string path = dir.str() + "/mute.sock";  // accepts, never answers
  UniqueFd listener = listen_unix(path);
  ASSERT_TRUE(listener.valid());
  cli::RpcSocketClient mute(path, 1 << 20);
  a = mute.call(net::RpcMethod::ping, "", 0.2);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.message(), "no answer within the deadline");
}

}  // namespace
}  // namespace corral::ctld
