// SPDX-License-Identifier: BSD-3-Clause
// The operator's reference names every drop reason the data plane counts:
// a new reason without a row in docs/operations.md fails here.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "psgate/counters.h"

namespace psgate {
namespace {

TEST(Docs, OperationsListsEveryDropReason) {
  const char* root = std::getenv("PSGATE_SOURCE_ROOT");
  if (root == nullptr) GTEST_SKIP() << "PSGATE_SOURCE_ROOT not set (run through meson test)";
  std::ifstream in(std::string(root) + "/docs/operations.md");
  ASSERT_TRUE(in) << "docs/operations.md not found";
  std::stringstream text;
  text << in.rdbuf();
  for (const char* reason : kDropReasonNames) {
    EXPECT_NE(text.str().find("| `" + std::string(reason) + "` |"), std::string::npos)
        << reason << " has no row in docs/operations.md's drop-reason table";
  }
}

}  // namespace
}  // namespace psgate
