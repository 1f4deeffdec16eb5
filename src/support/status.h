// Status / Expected<T>: errors a user can cause travel as values with a message naming the
// file, node or tensor at fault. Compiler bugs abort through KILN_CHECK instead.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace kiln {

class Status {
 public:
  Status() = default;
  static Status Error(std::string message) { return Status(std::move(message)); }
  bool ok() const { return !message_.has_value(); }
  const std::string& message() const { return *message_; }
  // Prefixes the message with context ("node 'conv1': ...").
  Status Context(const std::string& where) const {
    if (ok()) return *this;
    return Status(where + ": " + *message_);
  }

 private:
  explicit Status(std::string m) : message_(std::move(m)) {}
  std::optional<std::string> message_;
};

inline Status OkStatus() { return Status(); }
inline Status Error(std::string message) { return Status::Error(std::move(message)); }

// OK for an empty `why`, else ctx's error for it (which names ctx's node): how shape inference,
// the kernels and the emitters report what an op's plan found malformed.
template <class Context>
Status Checked(const Context& ctx, const std::string& why) {
  return why.empty() ? OkStatus() : ctx.error(why);
}

template <class T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Status status) : v_(std::move(status)) {
    if (std::get<Status>(v_).ok()) std::abort();  // an Expected error must carry an error
  }
  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* cond,
                                     const std::string& msg) {
  std::fprintf(stderr, "kiln internal error at %s:%d: check '%s' failed %s\n", file, line, cond,
               msg.c_str());
  std::abort();
}

}  // namespace kiln

#define KILN_CHECK(cond, ...)                                                              \
  do {                                                                                     \
    if (!(cond)) ::kiln::CheckFailed(__FILE__, __LINE__, #cond, std::string(__VA_ARGS__)); \
  } while (0)

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)

// Returns the error of a Status-valued expression from the enclosing function.
#define KILN_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::kiln::Status kiln_status_ = (expr);        \
    if (!kiln_status_.ok()) return kiln_status_; \
  } while (0)

// KILN_ASSIGN_OR_RETURN(auto x, ExpectedExpr());
#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(kiln_expected_, __LINE__), lhs, expr)
#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
