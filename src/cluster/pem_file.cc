// SPDX-License-Identifier: BSD-3-Clause
#include "psgate/pem_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace psgate {

Result<std::string> read_pem_file(const std::string& path) {
  using R = Result<std::string>;
  std::ifstream in(path, std::ios::binary);
  if (!in) return R::failure("cannot read " + path + ": " + std::strerror(errno));
  std::stringstream s;
  s << in.rdbuf();
  if (in.bad()) return R::failure("cannot read " + path);
  if (s.str().empty()) return R::failure(path + " is empty");
  return R(s.str());
}

}  // namespace psgate
