// Error values that cross library boundaries: a Status (ok or an Error) and a
// Result<T> (a T or an Error). Messages are written for the user who must act on them.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace corral {

enum class Errc {
  invalid_argument,  // the caller's input is wrong; the message names what and where
  not_found,
  permission_denied,
  already_exists,
  unavailable,         // a peer or resource is not reachable now; retrying may help
  resource_exhausted,  // a limit was reached (a per-user limit, a size); the message names it
  io_error,
  internal,
};

struct Error {
  Errc code = Errc::internal;
  std::string message;
};

inline Error invalid(std::string msg) { return {Errc::invalid_argument, std::move(msg)}; }
inline Error not_found(std::string msg) { return {Errc::not_found, std::move(msg)}; }
inline Error denied(std::string msg) { return {Errc::permission_denied, std::move(msg)}; }
inline Error io_error(std::string msg) { return {Errc::io_error, std::move(msg)}; }

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : err_(std::move(e)), ok_(false) {}  // NOLINT: implicit by design
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }
  const std::string& message() const { return err_.message; }

 private:
  Error err_;
  bool ok_ = true;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T v) : v_(std::move(v)) {}      // NOLINT: implicit by design
  Result(Error e) : v_(std::move(e)) {}  // NOLINT: implicit by design
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }
  const std::string& message() const { return error().message; }
  Status status() const { return ok() ? Status() : Status(error()); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace corral
