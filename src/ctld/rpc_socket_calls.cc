#include "ctld/rpc_socket_calls.h"

#include "client.pb.h"

namespace corral::ctld {

namespace {

// Parses Req, runs `call(req, &rep)` and serialises the reply when it succeeded.
template <class Req, class Reply, class Call>
Status unary(std::string_view request, std::string* reply, Call&& call) {
  Req req;
  if (!req.ParseFromArray(request.data(), static_cast<int>(request.size()))) {
    const std::string type = req.GetTypeName();  // "corral.v1.SubmitRequest"
    return invalid("malformed request: not a valid " + type.substr(type.rfind('.') + 1));
  }
  Reply rep;
  Status st = call(req, &rep);
  if (st) rep.SerializeToString(reply);
  return st;
}

}  // namespace

Status call_controller(Controller& ctl, const Caller& c, net::RpcMethod method, std::string_view request,
                       std::string* reply) {
  using M = net::RpcMethod;
  switch (method) {
    case M::submit:
      return unary<v1::SubmitRequest, v1::SubmitReply>(
          request, reply, [&](const auto& req, auto* rep) { return ctl.submit(c, req, rep); });
    case M::cancel:
      return unary<v1::CancelRequest, v1::CancelReply>(
          request, reply, [&](const auto& req, auto* rep) { return ctl.cancel(c, req, rep); });
    case M::list_jobs:
      return unary<v1::ListJobsRequest, v1::ListJobsReply>(
          request, reply, [&](const auto& req, auto* rep) { return ctl.list_jobs(c, req, rep); });
    case M::list_job_table:
      return unary<v1::ListJobsRequest, v1::JobTable>(
          request, reply, [&](const auto& req, auto* rep) { return ctl.list_job_table(c, req, rep); });
    case M::get_job:
      return unary<v1::GetJobRequest, v1::JobInfo>(
          request, reply, [&](const auto& req, auto* rep) { return ctl.get_job(c, req, rep); });
    case M::list_nodes:
      return unary<v1::ListNodesRequest, v1::ListNodesReply>(
          request, reply, [&](const auto& req, auto* rep) { return ctl.list_nodes(req, rep); });
    case M::ping:
      return unary<v1::PingRequest, v1::PingReply>(request, reply,
                                                   [&](const auto&, auto* rep) { return ctl.ping(c, rep); });
    case M::set_node_state:
      return unary<v1::NodeStateRequest, v1::NodeStateReply>(
          request, reply, [&](const auto& req, auto* rep) { return ctl.set_node_state(c, req, rep); });
    case M::get_topology:
      return unary<v1::GetTopologyRequest, v1::GetTopologyReply>(
          request, reply, [&](const auto& req, auto* rep) { return ctl.get_topology(req, rep); });
    case M::hook_query:
      return unary<v1::HookQueryRequest, v1::HookQueryReply>(
          request, reply, [&](const auto& req, auto* rep) { return ctl.hook_query(c, req, rep); });
    case M::list_steps:
      return unary<v1::ListStepsRequest, v1::ListStepsReply>(
          request, reply, [&](const auto& req, auto* rep) { return ctl.list_steps(c, req, rep); });
    case M::history:
      return unary<v1::HistoryRequest, v1::HistoryReply>(
          request, reply, [&](const auto& req, auto* rep) { return ctl.history(c, req, rep); });
    case M::shutdown:
      return unary<v1::ShutdownRequest, v1::ShutdownReply>(request, reply,
                                                           [&](const auto&, auto*) { return ctl.shutdown(c); });
    case M::watch:
      return invalid("watch is a stream: RpcSocketServer serves it");
  }
  return invalid("unknown method");
}

Status watch_controller(Controller& ctl, const Caller& c, std::string_view request, WatchSink& sink) {
  v1::WatchRequest req;
  if (!req.ParseFromArray(request.data(), static_cast<int>(request.size())))
    return invalid("malformed request: not a valid WatchRequest");
  std::shared_ptr<Subscriber> sub;
  if (Status st = ctl.subscribe(c, req, &sub); !st) return st;
  std::string bytes;
  for (;;) {
    v1::WatchReply rep;
    if (!sub->next(rep, 500))
      return sub->overflowed() ? Status(Error{Errc::resource_exhausted,
                                              "watch ended: the client read too slowly and too much was queued for it"})
                               : Status{};
    if (sink.gone()) return Error{Errc::unavailable, "the client went away"};
    if (rep.items_size() == 0) continue;
    bytes.clear();
    rep.SerializeToString(&bytes);
    if (!sink.write(bytes)) return Error{Errc::unavailable, "the client went away"};
  }
}

}  // namespace corral::ctld
