#include "cli/job_watch.h"

#include <chrono>
#include <map>
#include <thread>

#include <fmt/format.h>

namespace corral::cli {

Status follow_jobs(Client& client, const pb::WatchRequest& req, std::string_view cmd, const WatchItemFn& on_item) {
  std::map<uint64_t, size_t> seen;  // events delivered per job, to skip on replay
  bool reached = false;
  bool reported_loss = false;
  for (;;) {
    std::map<uint64_t, size_t> replayed;
    auto watched = client.watch(req);
    if (!watched) return watched.error();
    auto& stream = *watched;
    pb::WatchReply reply;
    while (stream->read(reply)) {
      if (reported_loss) {
        fmt::print(stderr, "corral {}: reconnected to the controller\n", cmd);
        reported_loss = false;
      }
      reached = true;
      for (const auto& item : reply.items()) {
        if (item.has_event()) {
          const uint64_t id = item.event().jobid();
          if (++replayed[id] <= seen[id]) continue;
          seen[id] = replayed[id];
        }
        on_item(item);
      }
    }
    Status st = stream->finish();
    if (st.ok() || !reached || st.error().code != Errc::unavailable) return st;
    if (!reported_loss) {
      fmt::print(stderr, "corral {}: lost contact with the controller; reconnecting...\n", cmd);
      reported_loss = true;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace corral::cli
