#include "node/pmi/pmi_exchange.h"

#include <memory>
#include <optional>

namespace corral::node {

void SharedNodesExchange::fence(PmiKvs local_puts, Done done) {
  auto parts = parts_();
  if (!parts) return done(parts.error());
  if (parts->empty()) return done(Error{Errc::internal, "no node of this agent takes part in the fence"});
  struct Join {
    std::size_t waiting;
    std::optional<Result<PmiKvs>> answer;  // the first, or the first error
    Done done;
  };
  auto join = std::make_shared<Join>(Join{parts->size(), std::nullopt, std::move(done)});
  for (std::size_t i = 0; i < parts->size(); ++i) {
    (*parts)[i]->fence(i == 0 ? std::move(local_puts) : PmiKvs{}, [join](Result<PmiKvs> all) {
      if (!join->answer || (*join->answer && !all)) join->answer = std::move(all);
      if (--join->waiting == 0) join->done(std::move(*join->answer));
    });
  }
}

}  // namespace corral::node
