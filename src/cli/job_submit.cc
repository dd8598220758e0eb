#include "cli/job_submit.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"

namespace corral::cli {

ParsedJob parse_or_exit(std::string_view cmd, const JobOptions& opts, const JobContext& ctx) {
  auto parsed = to_job_request(opts, ctx);
  if (!parsed) usage_error(cmd, parsed.message());
  return std::move(parsed).value();
}

pb::SubmitRequest build_submit_request(std::string_view cmd, const ParsedJob& job, const SubmitFlags& flags) {
  pb::SubmitRequest req;
  if (flags.dry_run) {
    auto spec = job::build_jobspec(job.request);
    if (!spec) usage_error(cmd, spec.message());
    req.add_jobspecs(job::jobspec_to_string(*spec));
  } else {
    auto text = job::build_jobspec_text(job.request);
    if (!text) usage_error(cmd, text.message());
    req.add_jobspecs(std::move(*text));
  }
  if (!job.cc.empty()) req.set_cc(job.cc);
  if (job.urgency) {
    req.set_urgency(*job.urgency);
    req.set_has_urgency(true);
  }
  return req;
}

bool dry_run(const SubmitFlags& flags, const pb::SubmitRequest& req) {
  if (!flags.dry_run) return false;
  for (const auto& text : req.jobspecs()) {
    auto doc = nlohmann::json::parse(text, nullptr, false);
    fmt::print("{}\n", doc.is_discarded() ? text : doc.dump(2));
  }
  return true;
}

std::vector<uint64_t> submit_request(Client& client, std::string_view cmd, const SubmitFlags& flags,
                                     const pb::SubmitRequest& req) {
  if (flags.verbose) fmt::print(stderr, "corral {}: submitting to {}: {}\n", cmd, client.uri(), req.jobspecs(0));
  // Refused or unreachable: nothing was started that needs undoing (see fail_rpc_now).
  auto reply = client.submit(req);
  if (!reply) fail_rpc_now(cmd, reply.error());
  if (reply->jobids_size() == 0) fail(cmd, "the controller accepted the job but returned no id");
  return {reply->jobids().begin(), reply->jobids().end()};
}

}  // namespace corral::cli
