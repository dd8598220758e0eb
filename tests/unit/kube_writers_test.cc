// The DWS writers against a real HTTP server: the ops of one key in order, ops of other
// keys at once, requests chained inside one op, retries of what the server could not take,
// an op that throws, and a stop with requests in flight.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "storage/dws/kube_writers.h"

namespace corral::storage::dws {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class Server {
 public:
  Server() {
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
  }
  ~Server() {
    svr_.stop();
    thread_.join();
  }
  httplib::Server& http() { return svr_; }
  std::shared_ptr<const KubeConfig> config() const {
    return std::make_shared<const KubeConfig>(KubeConfig{"http://127.0.0.1:" + std::to_string(port_), "", "", false});
  }

 private:
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
};

bool settle(const KubeWriters& w) {
  for (int i = 0; i < 1000 && w.pending() > 0; ++i) std::this_thread::sleep_for(10ms);
  return w.pending() == 0;
}

TEST(KubeWriters, OneKeyInOrderOtherKeysAtOnce) {
  Server s;
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::vector<int>> seen;
  bool other_arrived = false;
  s.http().Patch(R"(/apis/(\w+)/(\d+))", [&](const httplib::Request& req, httplib::Response& res) {
    std::unique_lock lk(mu);
    const std::string key = req.matches[1];
    seen[key].push_back(std::stoi(req.matches[2]));
    if (key == "other") other_arrived = true;
    cv.notify_all();
    // The first write of "slow" answers only once "other" arrived: were the writers one
    // request at a time, this would wait out its 5 s and the test would see it.
    if (key == "slow" && seen[key].size() == 1) cv.wait_for(lk, 5s, [&] { return other_arrived; });
    res.set_content(R"({"kind":"Workflow"})", "application/json");
  });
  KubeWriters w(s.config(), 4);
  std::atomic<bool> waited_for_other{false};
  for (int i = 0; i < 3; ++i)
    w.post("slow", [&, i](KubeWriters::Writer& wr) -> KubeWriters::Task {
      const json patch = {{"n", i}};  // named: GCC 12 cannot co_await a braced list
      auto r = co_await wr.merge_patch("/apis/slow/" + std::to_string(i), patch);
      EXPECT_TRUE(r && r->ok());
      if (i == 0) {
        std::lock_guard lk(mu);
        waited_for_other = other_arrived;
      }
    });
  w.post("other", [&](KubeWriters::Writer& wr) -> KubeWriters::Task {
    auto r = co_await wr.merge_patch("/apis/other/7", json::object());
    EXPECT_TRUE(r && r->ok());
  });
  ASSERT_TRUE(settle(w));
  EXPECT_EQ(seen["slow"], (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(seen["other"], (std::vector<int>{7}));
  EXPECT_TRUE(waited_for_other.load());
}

TEST(KubeWriters, ChainsRequestsAndRetriesWhatTheServerCouldNotTake) {
  Server s;
  std::atomic<int> gets{0}, patches{0};
  std::string patched;
  s.http().Get("/apis/obj", [&](const httplib::Request&, httplib::Response& res) {
    if (++gets <= 2) {  // busy twice, then the object
      res.status = 503;
      res.set_content(R"({"kind":"Status","message":"busy"})", "application/json");
      return;
    }
    res.set_content(R"({"metadata":{"resourceVersion":"42"}})", "application/json");
  });
  s.http().Patch("/apis/obj", [&](const httplib::Request& req, httplib::Response& res) {
    ++patches;
    patched = req.body;
    res.status = 409;
    res.set_content(R"({"kind":"Status","message":"the object has been modified"})", "application/json");
  });
  KubeWriters w(s.config(), 2);
  std::optional<long> last;
  std::string message;
  w.post("obj", [&](KubeWriters::Writer& wr) -> KubeWriters::Task {
    auto got = co_await wr.get("/apis/obj");
    if (!got || !got->ok()) co_return;
    const std::string rv = got->body["metadata"]["resourceVersion"];
    const json patch = {{"metadata", {{"resourceVersion", rv}}}};
    auto r = co_await wr.merge_patch("/apis/obj", patch);
    last = r ? r->http : -1;
    if (r) message = reply_error(*r, "patch").message;  // a refusal's body is read
  });
  ASSERT_TRUE(settle(w));
  EXPECT_EQ(gets.load(), 3);
  EXPECT_EQ(patches.load(), 1);  // a 409 is an answer, not something to retry
  EXPECT_EQ(json::parse(patched)["metadata"]["resourceVersion"], "42");
  EXPECT_EQ(last, 409);
  EXPECT_NE(message.find("the object has been modified"), std::string::npos);
}

TEST(KubeWriters, AnOpThatThrowsDoesNotStopTheNextOfItsKey) {
  Server s;
  std::atomic<int> hits{0};
  s.http().Delete("/apis/x", [&](const httplib::Request&, httplib::Response& res) {
    ++hits;
    res.set_content("{}", "application/json");
  });
  KubeWriters w(s.config(), 1);
  w.post("k", [](KubeWriters::Writer& wr) -> KubeWriters::Task {
    (void)co_await wr.remove("/apis/x");
    throw std::runtime_error("an answer of an unexpected shape");
  });
  bool second = false;
  w.post("k", [&](KubeWriters::Writer& wr) -> KubeWriters::Task {
    auto r = co_await wr.remove("/apis/x");
    second = r && r->ok();
  });
  ASSERT_TRUE(settle(w));
  EXPECT_EQ(hits.load(), 2);
  EXPECT_TRUE(second);
}

TEST(KubeWriters, StopsWithARequestInFlightAndUnreachableServers) {
  Server s;
  std::atomic<bool> release{false};
  s.http().Patch("/apis/hang", [&](const httplib::Request&, httplib::Response& res) {
    for (int i = 0; i < 500 && !release; ++i) std::this_thread::sleep_for(10ms);
    res.set_content("{}", "application/json");
  });
  bool resumed = false;
  {
    KubeWriters w(s.config(), 2);
    w.post("a", [&](KubeWriters::Writer& wr) -> KubeWriters::Task {
      (void)co_await wr.merge_patch("/apis/hang", json::object());
      resumed = true;
    });
    // Nothing listens here: the request is retried until the writers stop.
    KubeWriters nowhere(std::make_shared<const KubeConfig>(KubeConfig{"http://127.0.0.1:1", "", "", false}), 1);
    nowhere.post("b", [&](KubeWriters::Writer& wr) -> KubeWriters::Task {
      (void)co_await wr.get("/apis/anything");
      resumed = true;
    });
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(w.pending(), 1u);
    EXPECT_EQ(nowhere.pending(), 1u);
    w.stop();
    nowhere.stop();
  }
  release = true;
  EXPECT_FALSE(resumed);
}

}  // namespace
}  // namespace corral::storage::dws
