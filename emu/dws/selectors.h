// Kubernetes label selectors ("app=x,tier!=db,env in (a,b),!gone") and the field selectors
// custom resources support (metadata.name, metadata.namespace; = == !=).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace corral::emu::dws {

class Selector {
 public:
  // The error text is what the API server answers with a 400.
  static Result<Selector> parse(const std::string& labels, const std::string& fields);
  bool matches(const nlohmann::json& obj) const;
  bool empty() const { return terms_.empty(); }

 private:
  struct Term {
    enum class Op { eq, ne, in, notin, exists, absent } op;
    bool field = false;  // a field selector term (key is a field path)
    std::string key;
    std::vector<std::string> values;
  };
  std::vector<Term> terms_;
};

}  // namespace corral::emu::dws
