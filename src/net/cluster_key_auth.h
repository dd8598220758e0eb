// The cluster-key method of net/credentials.h. A daemon that holds the cluster key (corrald,
// a node agent, corral-authd) signs and checks credentials itself; any other process asks
// corral-authd on its host, which signs as the uid and gid the kernel gives it.
#pragma once

#include <memory>
#include <string>

#include "net/credentials.h"
#include "util/result.h"

namespace corral::net {

// `key_file` (hex, private to its owner): sign and check with it; empty: sign through
// corral-authd at `authd_socket` ("" its default), and check nothing.
Result<std::unique_ptr<Credentials>> cluster_key_credentials(const std::string& key_file,
                                                             const std::string& authd_socket);

// The same from a key already read (corral-authd and tests).
std::unique_ptr<Credentials> cluster_key_credentials_from_key(std::string key);

// The address a credential made on this host names as its origin: the first IPv4 address
// the host's name resolves to, as munged does ("" when it resolves to none).
std::string this_host_origin();

}  // namespace corral::net
