// SPDX-License-Identifier: BSD-3-Clause
// A directory of a test's own under /tmp, removed with what is in it when
// the test ends.
#pragma once

#include <stdlib.h>  // mkdtemp

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace psgate::testing {

class TempDir {
 public:
  // The directory is /tmp/PREFIX-XXXXXX; a test cannot run without it.
  explicit TempDir(const std::string& prefix) {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    dir = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string path(const std::string& name) const { return dir + "/" + name; }

  std::string dir;
};

}  // namespace psgate::testing
