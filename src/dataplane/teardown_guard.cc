// SPDX-License-Identifier: BSD-3-Clause
// The one teardown guard of the process (psgate/loop_epochs.h): psgate's
// data plane or psgate-gen's engine sets it while its loops run.
#include "psgate/loop_epochs.h"

namespace psgate {

std::atomic<LoopEpochs*> g_teardown_guard{nullptr};

}  // namespace psgate
