// SPDX-License-Identifier: BSD-3-Clause
// Human-readable reports of the data plane's counters: the periodic per-job
// rate table and the full table printed at exit.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "psgate/dataplane.h"
#include "psgate/snapshot.h"

namespace psgate {

// Rates between two reads `seconds` apart: one summary line.
std::string format_summary_line(const Totals& prev, const Totals& cur, double seconds);
// Per-job offered/sent rates between two reads, as an aligned table.
// `prev_job_of_slot`: the job id each slot had at `prev` (0: none; empty:
// unknown): a slot that changed owner since restarted from 0 (its baseline
// was reset), so what it holds now is all its new job's.
std::string format_job_rates(const Totals& prev, const Totals& cur, double seconds, const Snapshot& snap,
                             double uptime_seconds, const std::vector<uint32_t>& prev_job_of_slot = {});
// Everything: ports, drops by reason, classes with sojourn percentiles, jobs,
// and the conservation check (received = transmitted + dropped).
std::string format_final_report(const Totals& totals, const Snapshot& snap, const ConfigSpec& config);

// received == transmitted + every named drop (after a drained shutdown).
bool conservation_holds(const Totals& totals);

// Prints the periodic table from a thread of its own. Written by the control
// thread, a stdout that blocked (a pipe nobody reads, a stopped terminal)
// held that thread: the control socket, its tick, the watchdog and a stop
// all waited for the reader. A table given while the last one is still
// being written replaces any that waits (the newest figures win), counted
// in skipped(). The destructor writes what waits, so it returns only once
// the output takes it, as the final report printed next would.
class BackgroundPrinter {
 public:
  explicit BackgroundPrinter(std::FILE* out);
  ~BackgroundPrinter();
  BackgroundPrinter(const BackgroundPrinter&) = delete;
  BackgroundPrinter& operator=(const BackgroundPrinter&) = delete;

  void print(std::string text);  // never waits for the output
  uint64_t skipped() const;

 private:
  void run();
  std::FILE* const out_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::string waiting_;  // under mutex_
  bool has_waiting_ = false, stopping_ = false;
  uint64_t skipped_ = 0;
  std::thread thread_;
};

}  // namespace psgate
