// The node half of Rabbit storage: before a job's tasks start on a node, every DW_JOB_*
// path the controller's dws hook gave the job must be mounted there (a directory the
// job's user owns, which the node's mount daemon made so when it reported the ClientMount
// mounted). A missing mount fails the launch on that node with the path in the message,
// instead of tasks failing later on a path that is not there.
#pragma once

#include <memory>

#include "hook/node_hook.h"

namespace corral::storage::dws {

std::unique_ptr<hook::NodeHook> make_dws_node_hook();

}  // namespace corral::storage::dws
