// SPDX-License-Identifier: BSD-3-Clause
// Result<T>: a value or a human-readable error, for configuration and control
// paths (never the per-packet path). C++20 has no std::expected.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace psgate {

template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  static Result failure(std::string error) {
    Result r;
    r.error_ = std::move(error);
    return r;
  }

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return error_; }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Result() = default;
  std::optional<T> value_;
  std::string error_;
};

}  // namespace psgate
