// SPDX-License-Identifier: BSD-3-Clause
// DPDK test binary entry point: one EAL per process, on --no-huge memory and
// with a file prefix of its own so that parallel test binaries never collide.
#include <gtest/gtest.h>
#include <rte_eal.h>

#include "psgate/eal_teardown.h"

#include <unistd.h>
#include <string>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string prefix = "--file-prefix=psgate-test-" + std::to_string(getpid());
  const char* eal_argv[] = {"dpdk_tests",    "--no-huge",   "-m", "512", "--no-pci", "--lcores=0@0,1@1,2@0,3@1,4@0",
                            "--log-level=4", prefix.c_str()};
  int eal_argc = sizeof(eal_argv) / sizeof(eal_argv[0]);
  if (rte_eal_init(eal_argc, const_cast<char**>(eal_argv)) < 0) {
    fprintf(stderr, "rte_eal_init failed\n");
    return 2;
  }
  int rc = RUN_ALL_TESTS();
  if (!psgate::eal_cleanup_after_interrupts()) fprintf(stderr, "EAL's interrupt thread did not answer\n");
  return rc;
}
