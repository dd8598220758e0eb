// Failures as a Kubernetes API server reports them: an HTTP code and a `Status` body whose
// reason and message clients (kubectl, client-go, the Python client) parse and print.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "crd_catalog.h"
#include "openapi_schema.h"

namespace corral::emu::dws {

struct ApiError {
  int code = 500;
  std::string reason;  // NotFound, AlreadyExists, Conflict, Invalid, Forbidden, BadRequest, Expired, ...
  std::string message;
  nlohmann::json details = nlohmann::json::object();
};

nlohmann::json status_body(const ApiError& e);

ApiError not_found_error(const KindInfo& k, const std::string& name);
ApiError already_exists_error(const KindInfo& k, const std::string& name);
ApiError conflict_error(const KindInfo& k, const std::string& name);
ApiError invalid_error(const KindInfo& k, const std::string& name, const std::vector<FieldError>& errs);
// A validating admission webhook's denial.
ApiError webhook_denied(const std::string& webhook, const std::string& message);
ApiError bad_request(const std::string& message);
ApiError gone_error(const std::string& message);

// A value or the ApiError that stopped it.
template <class T>
class ApiResult {
 public:
  ApiResult(T v) : v_(std::move(v)) {}         // NOLINT: implicit by design
  ApiResult(ApiError e) : v_(std::move(e)) {}  // NOLINT: implicit by design
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& operator*() { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const ApiError& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, ApiError> v_;
};

}  // namespace corral::emu::dws
