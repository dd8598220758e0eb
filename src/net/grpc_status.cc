#include "net/grpc_status.h"

namespace corral::net {

namespace {

grpc::StatusCode code_of(Errc code) {
  switch (code) {
    case Errc::invalid_argument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case Errc::not_found:
      return grpc::StatusCode::NOT_FOUND;
    case Errc::permission_denied:
      return grpc::StatusCode::PERMISSION_DENIED;
    case Errc::already_exists:
      return grpc::StatusCode::ALREADY_EXISTS;
    case Errc::unavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case Errc::resource_exhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case Errc::io_error:
    case Errc::internal:
      break;
  }
  return grpc::StatusCode::INTERNAL;
}

}  // namespace

grpc::Status to_grpc(const Error& e) { return {code_of(e.code), e.message}; }

grpc::Status to_grpc(const Status& st) { return st.ok() ? grpc::Status::OK : to_grpc(st.error()); }

int grpc_code(const Status& st) { return static_cast<int>(to_grpc(st).error_code()); }

}  // namespace corral::net
