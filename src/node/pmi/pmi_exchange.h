// How a node's PMI server shares its tasks' puts with the other nodes of a step. At every
// PMI barrier the server hands over the puts its local ranks made since the previous
// barrier; once every node of the step has done so, `done` receives the puts of all
// nodes and the server lets its ranks out of the barrier. The step manager implements
// this across nodes; LocalPmiExchange serves a step that lives on a single node.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "util/result.h"

namespace corral::node {

using PmiKvs = std::map<std::string, std::string>;

class PmiExchange {
 public:
  // Called on the agent's loop thread, once per barrier, in barrier order. `done` may be
  // called from inside fence() or later, but on the loop thread (post() it from others)
  // and exactly once. An error (a node of the step went away) makes the server drop
  // every connection of the step and report the message through its on_error callback.
  using Done = std::function<void(Result<PmiKvs> all_puts)>;

  virtual ~PmiExchange() = default;
  virtual void fence(PmiKvs local_puts, Done done) = 0;
};

// One node: everybody's puts are already here.
class LocalPmiExchange final : public PmiExchange {
 public:
  void fence(PmiKvs local_puts, Done done) override { done(std::move(local_puts)); }
};

}  // namespace corral::node

namespace corral::node {

// Several nodes of one agent taking part in each fence with a single contribution (a
// PMIx server serves all of an agent's ranks): `parts` names the nodes' exchanges when a
// fence starts; the first carries the puts, the others take part with none, and `done`
// gets the first answer once every part has answered (an error if any failed).
class SharedNodesExchange final : public PmiExchange {
 public:
  using Parts = std::function<Result<std::vector<PmiExchange*>>()>;
  explicit SharedNodesExchange(Parts parts) : parts_(std::move(parts)) {}
  void fence(PmiKvs local_puts, Done done) override;

 private:
  Parts parts_;
};

}  // namespace corral::node
