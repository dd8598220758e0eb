// corral-authd's server: on its Unix socket (mode 0777) each connection is one request
// (net/authd_wire.h) and one answer, a cluster-key credential (net/cluster_cred.h) in the
// uid and gid the kernel gives for the connection (SO_PEERCRED, read at accept). The caller
// chooses only the payload and who may read it; nothing it sends changes who the credential
// says it is.
//
// Each connection is served on a thread of its own with a 2-second limit for the request,
// at most 8 at once per uid and 256 in all: a user who opens connections and sends nothing
// blocks only his own.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "util/result.h"
#include "util/unique_fd.h"

namespace corral::authd {

class SignServer {
 public:
  static constexpr size_t kPerUser = 8;
  static constexpr size_t kTotal = 256;

  // Binds `path` (replacing a stale socket). `origin`: this host's address, in every
  // credential (net::this_host_origin()).
  static Result<std::unique_ptr<SignServer>> open(const std::string& path, std::string key, std::string origin);
  ~SignServer();
  SignServer(const SignServer&) = delete;
  SignServer& operator=(const SignServer&) = delete;

  // Accepts until stop() (from another thread or a signal handler thread).
  void run();
  void stop();

 private:
  SignServer(UniqueFd listen, UniqueFd wake, std::string path, std::string key, std::string origin);
  bool admit(uid_t uid);
  void serve(UniqueFd conn, uid_t uid, gid_t gid);
  void release(uid_t uid);

  UniqueFd listen_;
  UniqueFd wake_;  // eventfd that ends run()
  std::string path_;
  const std::string key_;
  const std::string origin_;
  std::mutex mu_;
  std::condition_variable idle_;
  std::map<uid_t, size_t> busy_;  // connections being served, per uid
  size_t total_ = 0;
};

}  // namespace corral::authd
