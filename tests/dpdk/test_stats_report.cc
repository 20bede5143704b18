// SPDX-License-Identifier: BSD-3-Clause
// The daemon's periodic per-job rate table (stats_report.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "lcore_modes.h"
#include "packet_builder.h"
#include "pipeline_harness.h"
#include "stats/stats_report.h"

namespace psgate {
namespace {

// A slot that changed owner between two reports restarted from 0 (its
// baseline was reset): the new job's rate is what it counted since, not the
// difference with the previous owner's lifetime counts, which wrapped to
// about 1.5e14 Mb/s.
TEST(StatsReport, AJobInAReusedSlotShowsItsOwnRateNotAWrappedDifference) {
  Totals prev, cur;
  prev.jobs.resize(1);
  cur.jobs.resize(1);
  prev.jobs[0].sent_bytes[kPull] = 1'000'000'000;  // the slot's previous owner
  prev.jobs[0].drops = 50;
  cur.jobs[0].sent_bytes[kPull] = 125'000;  // the new owner since its reset: 1 Mbit in 1 s
  Snapshot snap;
  snap.slots.resize(1);
  snap.jobs.push_back(JobEntry{0, 3, "three", 0});
  const std::string out = format_job_rates(prev, cur, 1.0, snap, 10.0, {7});  // job 7 had the slot
  EXPECT_NE(out.find("     1.0 Mb/s"), std::string::npos) << out;
  EXPECT_EQ(out.find("1475739"), std::string::npos) << out;
  EXPECT_EQ(out.find("18446744"), std::string::npos) << out;
  // The new job counted more than the old one had: all of it is the new
  // job's (2 Mbit), not the difference (1 Mbit).
  prev.jobs[0].sent_bytes[kPull] = 125'000;
  cur.jobs[0].sent_bytes[kPull] = 250'000;
  EXPECT_NE(format_job_rates(prev, cur, 1.0, snap, 10.0, {7}).find("     2.0 Mb/s"), std::string::npos);
  // The same job in its slot: the difference.
  EXPECT_NE(format_job_rates(prev, cur, 1.0, snap, 10.0, {3}).find("     1.0 Mb/s"), std::string::npos);
}

// GET /metrics reads from its own thread while the control thread gives a
// job's slot to another: job k (each added into the one slot, then removed)
// is sent k % 7 + 1 packets, so any count a view shows for job k is 0 or
// that. Read across a commit, a new job showed its predecessor's count (and
// went back to 0 at the next scrape).
TEST(StatsRead, AMetricsViewNeverShowsANewJobItsPredecessorsCounts) {
  testing::PipelineHarness h(
      "[lcores]\nmain = 0\ndata = [1]\n[classes]\ncount = 8\ndepth = 256\n"
      "[dataplane]\nmbufs = 8191\nmax_jobs = 1\n[stats]\ninterval = \"0s\"\n",
      /*start_lcores=*/false);
  ASSERT_TRUE(h.ok()) << h.error();
  const std::vector<uint8_t> frame = pkt::build_packet(pkt::from_ps(5000, 1, 100));
  std::atomic<bool> done{false};
  std::atomic<uint64_t> views{0};
  std::mutex wrong_mutex;
  std::string wrong;  // the first wrong count seen, under wrong_mutex
  auto found_wrong = [&] {
    std::lock_guard<std::mutex> lock(wrong_mutex);
    return !wrong.empty();
  };
  std::thread reader([&] {
    while (!done.load(std::memory_order_relaxed)) {
      const MetricsView v = h.control().metrics_view();
      for (const MetricsJob& j : v.jobs) {
        const uint64_t got = j.counters.admitted_packets[kPull];
        std::lock_guard<std::mutex> lock(wrong_mutex);
        if (got != 0 && got != j.id % 7 + 1 && wrong.empty())
          wrong = "job " + std::to_string(j.id) + " showed " + std::to_string(got);
      }
      views.fetch_add(1, std::memory_order_relaxed);
    }
  });
  // No ASSERT in the loop: returning with the reader running would end the
  // process rather than report the failure.
  bool ok = true;
  for (uint32_t k = 1; k <= 1500 && ok && !found_wrong(); ++k) {
    ok = h.control().handle({{"cmd", "jobs.add"}, {"job", k}, {"match", {"src=10.0.0.5/32,sport=5000"}}})["ok"] == true;
    for (uint32_t n = 0; ok && n < k % 7 + 1; ++n) {
      rte_mbuf* m = h.mbuf_of(frame);
      ok = m != nullptr && h.inject(1, &m, 1) == 1;
    }
    ok = ok && h.dataplane().run_once();
    rte_mbuf* out[16];
    for (unsigned c; (c = h.collect(0, out, 16)) != 0;) rte_pktmbuf_free_bulk(out, c);
    ok = ok && h.control().handle({{"cmd", "jobs.remove"}, {"job", k}})["ok"] == true;
  }
  done = true;
  reader.join();
  ASSERT_TRUE(ok) << "a jobs.add, inject or jobs.remove failed";
  EXPECT_GT(views.load(), 100u);
  EXPECT_FALSE(found_wrong()) << wrong;
}

// The periodic table goes out from a thread of its own: written by the
// control thread, a stdout nobody read (a full pipe) held that thread, and
// with it the control socket, the tick and a stop. print() returns at once
// while the pipe is full; the newest table is what comes out once it is read.
TEST(StatsReport, ATableForAStdoutNobodyReadsNeverHoldsThePrinter) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::FILE* out = ::fdopen(fds[1], "w");
  ASSERT_NE(out, nullptr);
  std::string drained;
  uint64_t skipped = 0;
  {
    BackgroundPrinter printer(out);
    // A table longer than the pipe holds: the first one fills it.
    const int pipe_bytes = ::fcntl(fds[1], F_GETPIPE_SZ);
    ASSERT_GT(pipe_bytes, 0);
    const std::string block(static_cast<size_t>(pipe_bytes) + 1, 'x');
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 50; ++i) printer.print(block + "table " + std::to_string(i) + "\n");
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(took, 5.0) << "print() waited for the output";  // it would wait for ever: nobody reads yet
    EXPECT_GT(printer.skipped(), 0u);
    // Read until the newest table is out; the destructor then returns.
    std::thread reader([&] {
      char buf[65536];
      for (ssize_t n; drained.find("table 49\n") == std::string::npos && (n = ::read(fds[0], buf, sizeof buf)) > 0;)
        drained.append(buf, static_cast<size_t>(n));
    });
    reader.join();
    skipped = printer.skipped();
  }
  std::fclose(out);
  ::close(fds[0]);
  EXPECT_NE(drained.find("table 49\n"), std::string::npos) << "the newest table was lost";
  // Each table is written whole or skipped, and counted so.
  size_t written = 0;
  for (size_t at = 0; (at = drained.find("table ", at)) != std::string::npos; at += 6) ++written;
  EXPECT_EQ(written + skipped, 50u);
}

// The final report goes through finish(): written, it says so; a write that
// fails says its errno; an output that takes nothing within the limit is
// "held", and finish() returns then rather than wait for a reader (the
// stop hung at the report on a stdout nobody read). Once the reader comes,
// the writer left behind still finishes its write: it owns what it uses.
TEST(StatsReport, FinishWaitsABoundedTimeForTheLastText) {
  {
    std::FILE* out = std::tmpfile();
    ASSERT_NE(out, nullptr);
    BackgroundPrinter printer(out);
    printer.print("table\n");
    const auto done = printer.finish("report\n", std::chrono::seconds(5));
    EXPECT_EQ(done.outcome, BackgroundPrinter::Outcome::kWritten);
    std::rewind(out);
    char text[64] = {};
    EXPECT_EQ(std::fread(text, 1, sizeof text - 1, out), 13u);
    EXPECT_STREQ(text, "table\nreport\n") << "the last table goes before the report";
    std::fclose(out);
  }
  {
    std::FILE* full = std::fopen("/dev/full", "w");
    ASSERT_NE(full, nullptr);
    BackgroundPrinter printer(full);
    const auto done = printer.finish("report\n", std::chrono::seconds(5));
    EXPECT_EQ(done.outcome, BackgroundPrinter::Outcome::kFailed);
    EXPECT_EQ(done.error, ENOSPC);
    std::fclose(full);
  }
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::FILE* out = ::fdopen(fds[1], "w");
  ASSERT_NE(out, nullptr);
  const int pipe_bytes = ::fcntl(fds[1], F_GETPIPE_SZ);
  ASSERT_GT(pipe_bytes, 0);
  const std::string report(static_cast<size_t>(pipe_bytes) * 2, 'r');
  auto printer = std::make_unique<BackgroundPrinter>(out);
  const auto t0 = std::chrono::steady_clock::now();
  const auto done = printer->finish(report + "end\n", std::chrono::milliseconds(300));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(done.outcome, BackgroundPrinter::Outcome::kHeld);
  EXPECT_LT(took, 3.0) << "finish() waited for a reader";
  printer.reset();  // returns at once: the writer is left in its write
  std::string drained;
  char buf[65536];
  for (ssize_t n; drained.find("end\n") == std::string::npos && (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    drained.append(buf, static_cast<size_t>(n));
  EXPECT_EQ(drained, report + "end\n") << "the writer left behind lost its text";
  // The writer thread may still be between its write and its return: the
  // stream stays open (leaked) rather than closed under it.
  ::close(fds[0]);
}

// A live read of a busy gateway's totals: every packet counted sent or
// dropped was counted received first, so received is never below sent plus
// dropped (`in_flight`, what psgatectl stats shows, never negative). The
// counters were read lcore by lcore, received first: a burst that came and
// went between those reads showed as in_flight -7 in a helper's run.
TEST(StatsRead, ALiveReadNeverCountsMorePacketsOutThanIn) {
  for (const char* lcores : {"[1]", "[1, 2]", testing::kOneTwoPipelined}) {
    testing::PipelineHarness h(std::string("[lcores]\nmain = 0\ndata = ") + lcores +
                               "\n[classes]\ncount = 8\ndepth = 64\n[dataplane]\nmbufs = 8191\n"
                               "[stats]\ninterval = \"0s\"\n[[jobs]]\nid = 1\nrank = 0\n"
                               "match = [\"src=10.0.0.5/32,sport=5000\"]\n");
    ASSERT_TRUE(h.ok()) << h.error();
    const std::vector<uint8_t> frame = pkt::build_packet(pkt::from_ps(5000, 1, 100));
    std::atomic<bool> done{false};
    // The feeder keeps packets moving both ways (some dropped: the class
    // depth is small), draining what leaves.
    std::thread feeder([&] {
      rte_mbuf* pkts[32];
      while (!done.load(std::memory_order_relaxed)) {
        for (unsigned port = 0; port < 2; ++port) {
          unsigned n = 0;
          for (; n < 32; ++n)
            if ((pkts[n] = h.mbuf_of(frame)) == nullptr) break;
          const unsigned in = h.inject(port, pkts, n);
          if (in < n) rte_pktmbuf_free_bulk(pkts + in, n - in);
          for (unsigned c; (c = h.collect(port, pkts, 32)) != 0;) rte_pktmbuf_free_bulk(pkts, c);
        }
      }
    });
    uint64_t reads = 0, negative = 0, worst = 0, received = 0;
    // At least 1.5 s, and until there was enough traffic and enough reads to
    // say: on a loaded machine the feeder, the lcores and this thread may get
    // little of their CPUs for seconds (a fixed 1.5 s once saw 8,190
    // received, the two RX rings' first fill and no more; with a SCHED_FIFO
    // loop taking this CPU 90% of the time, 97 reads). A gateway that
    // stopped forwarding still fails below, after a minute.
    const auto start = std::chrono::steady_clock::now();
    for (auto now = start; now < start + std::chrono::seconds(60); now = std::chrono::steady_clock::now()) {
      if (now >= start + std::chrono::milliseconds(1500) && received > 10'000 && reads > 100) break;
      const Totals t = h.dataplane().read_totals(false);
      const uint64_t out = t.tx_total() + t.drop_total();
      ++reads;
      received = t.rx_total();
      if (out > received) {
        ++negative;
        worst = std::max(worst, out - received);
      }
    }
    done = true;
    feeder.join();
    EXPECT_EQ(negative, 0u) << lcores << ": " << negative << " of " << reads << " reads counted up to " << worst
                            << " packets more out than in";
    EXPECT_GT(received, 10'000u) << lcores << ": too little traffic to say";
    EXPECT_GT(reads, 100u) << lcores;
    std::printf("[ live-read ] %s: %lu reads, %lu packets received\n", lcores, static_cast<unsigned long>(reads),
                static_cast<unsigned long>(received));
  }
}

}  // namespace
}  // namespace psgate
