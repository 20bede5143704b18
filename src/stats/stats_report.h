// SPDX-License-Identifier: BSD-3-Clause
// Human-readable reports of the data plane's counters: the periodic per-job
// rate table and the full table printed at exit.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
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
// in skipped(). The last text (the final report) goes through finish(),
// which waits a bounded time: a stop is never held by a reader either.
class BackgroundPrinter {
 public:
  explicit BackgroundPrinter(std::FILE* out);
  // Without finish(): writes what waits, returning once the output took it.
  // After a finish() that found the output held: returns at once, leaving
  // the writer in its write (it owns what it uses).
  ~BackgroundPrinter();
  BackgroundPrinter(const BackgroundPrinter&) = delete;
  BackgroundPrinter& operator=(const BackgroundPrinter&) = delete;

  void print(std::string text);  // never waits for the output
  uint64_t skipped() const;

  // What finish() found: the output took every byte; a write failed
  // (`error` is its errno); or nothing came back within the limit (the
  // output is not read): the writer may hold the FILE's lock for good, so
  // the caller must not touch that stream again, nor leave through exit(),
  // whose flush would wait too.
  enum class Outcome { kWritten, kFailed, kHeld };
  struct Finished {
    Outcome outcome;
    int error;
  };
  // Writes what waits, then `last`, waiting up to `limit` for the output.
  Finished finish(std::string last, std::chrono::milliseconds limit);

 private:
  struct State;
  static void run(const std::shared_ptr<State>& state);
  std::shared_ptr<State> state_;  // shared with the writer thread, which may outlive this
  std::thread thread_;
};

}  // namespace psgate
