// Following jobs through the controller's Watch stream until they are INACTIVE. If the
// controller goes away after the stream was established (a restart), the stream is
// re-opened with history and the replayed events already seen are skipped, so callers
// see each event once.
#pragma once

#include <functional>
#include <string_view>

#include "cli/client/client.h"

namespace corral::cli {

using WatchItemFn = std::function<void(const pb::WatchItem&)>;

// `req.history` should be set so a re-opened stream can catch up. Returns when the stream
// ends cleanly; an error if the controller can't be reached at first or refuses.
Status follow_jobs(Client& client, const pb::WatchRequest& req, std::string_view cmd, const WatchItemFn& on_item);

}  // namespace corral::cli
