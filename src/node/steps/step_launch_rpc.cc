#include "node/steps/step_launch_rpc.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "node/steps/step_node.h"
#include "steps.grpc.pb.h"
#include "util/event_loop.h"

namespace corral::node {

namespace {

using namespace std::chrono_literals;

// After the subtree is done, how long the parent gets to close its side (it does so once
// it has every exit) before the stream is cut; its messages were all written by then.
constexpr auto kHalfCloseWait = 5s;
// How long a cancelled stream waits for the killed subtree before giving up on `done`.
constexpr auto kAbandonWait = 10s;

// Shared with callbacks that may outlive the rpc (the loop runs them later).
struct State {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<v1::LaunchUp> queue;
  bool done = false;
  bool reads_over = false;
  std::string error;
  std::optional<StepNode::LaunchId> id;  // loop thread only
};

// A launch refused as a whole still accounts for every rank, so the parent can count.
v1::LaunchUp refusal(const v1::LaunchTasksRequest& req, const std::string& error) {
  v1::LaunchUp up;
  for (const auto& n : req.nodes()) {
    auto* e = up.add_errors();
    e->set_node(n.name());
    e->set_message(error);
    for (uint32_t r = 0; r < n.ntasks(); ++r) {
      auto* x = up.add_exits();
      x->set_rank(n.first_rank() + r);
      x->set_waitstatus(1 << 8);
    }
  }
  return up;
}

void write_loop(grpc::ServerContext* ctx, grpc::ServerReaderWriter<v1::LaunchUp, v1::LaunchDown>* stream, State& st) {
  std::unique_lock lock(st.mu);
  std::optional<std::chrono::steady_clock::time_point> give_up;
  for (;;) {
    st.cv.wait_for(lock, 200ms, [&] { return st.done || !st.queue.empty(); });
    if (ctx->IsCancelled()) return;
    // Without a parent reading on, the subtree is being abandoned; its `done` may never
    // come if the agent is going away too.
    if (st.reads_over && !give_up) give_up = std::chrono::steady_clock::now() + kAbandonWait;
    if (give_up && std::chrono::steady_clock::now() > *give_up) return;
    if (!st.queue.empty()) {
      v1::LaunchUp msg = std::move(st.queue.front());
      st.queue.pop_front();
      lock.unlock();
      bool ok = stream->Write(msg);
      lock.lock();
      if (!ok) {
        ctx->TryCancel();  // also ends the handler's Read
        return;
      }
      continue;
    }
    if (st.done) break;
  }
  if (!st.cv.wait_for(lock, kHalfCloseWait, [&] { return st.reads_over; })) ctx->TryCancel();
}

}  // namespace

grpc::Status serve_launch_tasks(EventLoop& loop, StepNode& node, grpc::ServerContext* ctx,
                                grpc::ServerReaderWriter<v1::LaunchUp, v1::LaunchDown>* stream) {
  v1::LaunchDown first;
  if (!stream->Read(&first))
    return {grpc::StatusCode::INVALID_ARGUMENT, "the LaunchTasks stream ended before its first message (`launch`)"};
  if (!first.has_launch())
    return {grpc::StatusCode::INVALID_ARGUMENT, "the first LaunchTasks message must carry `launch`"};

  auto st = std::make_shared<State>();
  loop.post([&node, st, req = std::move(*first.mutable_launch())]() mutable {
    auto up = [st](v1::LaunchUp&& msg) {
      std::lock_guard lock(st->mu);
      st->queue.push_back(std::move(msg));
      st->cv.notify_all();
    };
    auto done = [st, nodes = req](const std::string& error) {
      std::lock_guard lock(st->mu);
      if (!error.empty()) st->queue.push_back(refusal(nodes, error));
      st->error = error;
      st->done = true;
      st->cv.notify_all();
    };
    st->id = node.launch(std::move(req), std::move(up), std::move(done));
  });

  std::thread writer([ctx, stream, st] { write_loop(ctx, stream, *st); });
  v1::LaunchDown down;
  while (stream->Read(&down)) {
    loop.post([&node, st, msg = std::move(down)] {
      if (st->id) node.deliver(*st->id, msg);
    });
    down = v1::LaunchDown();
  }
  // Read ends when the parent cancels (or went away), or when it closed its side, which
  // it does once it has every exit of the subtree (`done` follows shortly then).
  const bool cancelled = ctx->IsCancelled();
  bool finished;
  {
    std::lock_guard lock(st->mu);
    st->reads_over = true;
    finished = st->done;
    st->cv.notify_all();
  }
  auto abandon = [&] {
    loop.post([&node, st] {
      if (st->id) node.abandon(*st->id);
    });
  };
  if (cancelled && !finished) abandon();
  writer.join();
  std::unique_lock lock(st->mu);
  if (!st->done) {
    // Nothing more can reach the tasks (stdin, signals, barrier results): they are
    // stopped rather than left hanging.
    if (!cancelled) abandon();
    st->cv.wait_for(lock, kAbandonWait, [&] { return st->done; });
    return {grpc::StatusCode::CANCELLED, "the parent ended the launch stream before the tasks ended"};
  }
  if (cancelled) return {grpc::StatusCode::CANCELLED, "the parent cancelled the launch stream"};
  if (!st->error.empty()) return {grpc::StatusCode::INVALID_ARGUMENT, st->error};
  return grpc::Status::OK;
}

}  // namespace corral::node
