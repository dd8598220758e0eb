#include "util/stop_signals.h"

#include <pthread.h>
#include <signal.h>

namespace corral {

namespace {

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void block_stop_signals() {
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

int wait_for_stop_signal() {
  const sigset_t set = stop_set();
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

}  // namespace corral
