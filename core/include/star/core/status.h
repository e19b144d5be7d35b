// Status and StatusOr<T>: how results and errors cross module boundaries.
//
// A Status is either OK or carries a code and a human-readable message. Messages
// name the offending field where there is one ("spec.workers.replicas: must be >= 1,
// got 0"). Library exceptions and C result codes are converted into a Status once,
// in the adapter that calls them; nothing above an adapter throws.
#pragma once

#include <cassert>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace star {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kOutOfRange,
  kUnavailable,
  kDeadlineExceeded,
  kAborted,
  kInternal,
  kUnimplemented,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
  static Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
  static Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "INVALID_ARGUMENT: spec.workers.replicas: must be >= 1, got 0", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "prefix: message" (used to add a field path).
  Status WithPrefix(std::string_view prefix) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

std::ostream& operator<<(std::ostream& os, const Status& s);

// True when the same request may succeed if simply retried later: Unavailable (the peer
// cannot be reached or is overloaded), DeadlineExceeded, Aborted (a conflict; re-read and
// retry). Every other code, OK included, is false: retrying would fail the same way.
bool IsTransient(const Status& s);

// Holds either a T or a non-OK Status. Accessing value() of an error is a programming
// error (asserts in debug builds).
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const T& value) : v_(value) {}           // NOLINT(google-explicit-constructor)
  StatusOr(T&& value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  StatusOr(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "StatusOr constructed from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  const T& value() const& { assert(ok()); return std::get<T>(v_); }
  T& value() & { assert(ok()); return std::get<T>(v_); }
  T&& value() && { assert(ok()); return std::get<T>(std::move(v_)); }

  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace star

// Propagates a non-OK Status from an expression returning Status.
#define STAR_RETURN_IF_ERROR(expr)            \
  do {                                        \
    ::star::Status _star_st = (expr);         \
    if (!_star_st.ok()) return _star_st;      \
  } while (0)

#define STAR_CONCAT_INNER_(a, b) a##b
#define STAR_CONCAT_(a, b) STAR_CONCAT_INNER_(a, b)

// STAR_ASSIGN_OR_RETURN(auto x, ExprReturningStatusOr());
#define STAR_ASSIGN_OR_RETURN(lhs, expr) \
  STAR_ASSIGN_OR_RETURN_IMPL_(STAR_CONCAT_(_star_sor_, __LINE__), lhs, expr)
#define STAR_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
