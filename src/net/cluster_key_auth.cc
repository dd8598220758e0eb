#include "net/cluster_key_auth.h"

#include <unistd.h>

#include <climits>

#include <fmt/format.h>

#include "job/hmac_key.h"
#include "net/authd_wire.h"
#include "net/cluster_cred.h"
#include "net/replay_cache.h"
#include "net/resolve.h"

namespace corral::net {

namespace {

class ClusterKeyCredentials final : public Credentials {
 public:
  ClusterKeyCredentials(std::string key, std::string authd_socket)
      : key_(std::move(key)), authd_socket_(std::move(authd_socket)), origin_(this_host_origin()) {}

  std::string_view name() const override { return "cluster-key"; }
  std::string_view source() const override {
    return "a credential from corral-authd, which holds the site's cluster key";
  }

  Result<std::string> encode(std::string_view payload) override { return sign(payload, std::nullopt); }
  Result<std::string> encode_for(std::string_view payload, uint32_t uid) override { return sign(payload, uid); }

  Result<Identity> decode(std::string_view text, std::string_view prefix, std::string* rest) override {
    if (text.empty()) return denied("no cluster-key credential");
    if (key_.empty())
      return Error{Errc::internal, "this process cannot check cluster-key credentials: it has no cluster key"};
    const int64_t now = cluster_cred_now();
    auto cred = open_cluster_cred(key_, text, now);
    if (!cred) return cred.error();
    if (cred->restrict_uid && *cred->restrict_uid != ::getuid())
      return denied(fmt::format("cluster-key credential refused: it is for uid {} only", *cred->restrict_uid));
    const std::string_view got = cred->payload;
    if (got.substr(0, prefix.size()) != prefix || (rest == nullptr && got.size() != prefix.size()))
      return denied("the cluster-key credential was not made for a corral request");
    // Last, so that a credential refused for another reason cannot fill the cache.
    if (auto st = replays_.remember(cred->nonce, cred->issued + cred->ttl, now); !st)
      return Error{st.error().code, "cluster-key credential refused: " + st.message()};
    if (rest != nullptr) rest->assign(got.substr(prefix.size()));
    return Identity{cred->uid, cred->gid, cred->origin};
  }

 private:
  Result<std::string> sign(std::string_view payload, std::optional<uint32_t> restrict_uid) {
    if (key_.empty())
      return authd_sign(authd_socket_.empty() ? std::string(kDefaultAuthdSocket) : authd_socket_,
                        AuthdRequest{restrict_uid, std::string(payload)});
    ClusterCred c;
    c.uid = static_cast<uint32_t>(::getuid());
    c.gid = static_cast<uint32_t>(::getgid());
    c.restrict_uid = restrict_uid;
    c.origin = origin_;
    c.payload = std::string(payload);
    return seal_cluster_cred(key_, std::move(c), cluster_cred_now());
  }

  const std::string key_;
  const std::string authd_socket_;
  const std::string origin_;
  ReplayCache replays_;
};

}  // namespace

Result<std::unique_ptr<Credentials>> cluster_key_credentials(const std::string& key_file,
                                                             const std::string& authd_socket) {
  std::string key;
  if (!key_file.empty()) {
    auto k = job::load_key_file(key_file);
    if (!k) return k.error();
    key = std::move(*k);
  }
  return std::unique_ptr<Credentials>(std::make_unique<ClusterKeyCredentials>(std::move(key), authd_socket));
}

std::unique_ptr<Credentials> cluster_key_credentials_from_key(std::string key) {
  return std::make_unique<ClusterKeyCredentials>(std::move(key), std::string());
}

std::string this_host_origin() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return {};
  auto addrs = resolve_ipv4(name);
  return addrs.empty() ? std::string() : addrs.front();
}

}  // namespace corral::net
