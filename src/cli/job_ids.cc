#include "cli/job_ids.h"

#include "cli/commands.h"
#include "cli/values.h"

namespace corral::cli {

std::vector<uint64_t> parse_jobids_or_exit(std::string_view cmd, const std::vector<std::string>& words) {
  std::vector<uint64_t> ids;
  for (const auto& word : words) {
    for (const auto& item : split_list(word)) {
      auto id = parse_jobid(item);
      if (!id) usage_error(cmd, id.message());
      ids.push_back(*id);
    }
  }
  return ids;
}

}  // namespace corral::cli
