// The daemons' stop signals: SIGTERM and SIGINT are blocked in every thread (so block them
// in main before any thread starts) and one thread waits for them; SIGPIPE is ignored, so a
// peer that went away is an error from write(2), not the end of the daemon.
#pragma once

namespace corral {

void block_stop_signals();
// Waits for SIGTERM or SIGINT (blocked by block_stop_signals()); returns the signal.
int wait_for_stop_signal();

}  // namespace corral
