// SPDX-License-Identifier: BSD-3-Clause
#include "psgate/pem_file.h"

#include "psgate/text.h"

namespace psgate {

namespace {

// A CA bundle of every public root is ~200 KiB: 1 MiB is room for any real
// one, and /dev/zero named by mistake is refused rather than read until
// memory runs out.
constexpr size_t kMaxPemFileBytes = 1 << 20;

}  // namespace

Result<std::string> read_pem_file(const std::string& path) {
  using R = Result<std::string>;
  std::string text;
  if (const int err = read_text_file(path, text, kMaxPemFileBytes))
    return R::failure(
        "cannot read " + path + ": " +
        (err == EFBIG ? std::string("larger than 1 MiB, more than a PEM file holds") : read_text_error(err)));
  if (text.empty()) return R::failure(path + " is empty");
  return R(std::move(text));
}

}  // namespace psgate
