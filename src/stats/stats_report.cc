// SPDX-License-Identifier: BSD-3-Clause
// Text reports of the counters (control path).
#include "stats/stats_report.h"

#include "stats/stats_json.h"

#include <fmt/format.h>

#include <cerrno>

namespace psgate {

namespace {

double mbit(uint64_t bytes, double seconds) { return seconds > 0 ? bytes * 8.0 / seconds / 1e6 : 0.0; }
double per_sec(uint64_t n, double seconds) { return seconds > 0 ? n / seconds : 0.0; }

std::string job_label(const JobEntry& job) { return fmt::format("{} {}", job.id, job.name); }

// A table's columns come from the counter tables (psgate/totals.h): one per
// field that names a column, in table order. `prefix` heads a per-direction
// field's column with its direction.
template <typename Fields>
void add_headings(std::string& out, const Fields& fields, const std::string& prefix = "") {
  for (const auto& f : fields) {
    if (f.info.column) out += fmt::format(" {:>{}}", prefix + f.info.column, f.info.width);
  }
}
template <typename Fields, typename Sums>
void add_values(std::string& out, const Fields& fields, const Sums& sums) {
  for (const auto& f : fields) {
    if (f.info.column) out += fmt::format(" {:>{}}", sums.*f.total, f.info.width);
  }
}
template <typename Fields, typename Sums>
void add_values(std::string& out, const Fields& fields, const Sums& sums, unsigned direction) {
  for (const auto& f : fields) {
    if (f.info.column) out += fmt::format(" {:>{}}", (sums.*f.total)[direction], f.info.width);
  }
}

constexpr Direction kReportDirections[] = {kPull, kPush};  // pull first: it contends at the PS host

}  // namespace

bool conservation_holds(const Totals& t) { return t.rx_total() == t.tx_total() + t.drop_total(); }

std::string format_summary_line(const Totals& prev, const Totals& cur, double s) {
  const uint64_t rx = cur.rx_total() - prev.rx_total();
  const uint64_t tx = cur.tx_total() - prev.tx_total();
  const uint64_t rx_bytes =
      cur.ports[0].rx_bytes + cur.ports[1].rx_bytes - prev.ports[0].rx_bytes - prev.ports[1].rx_bytes;
  const uint64_t tx_bytes =
      cur.ports[0].tx_bytes + cur.ports[1].tx_bytes - prev.ports[0].tx_bytes - prev.ports[1].tx_bytes;
  std::string drops;
  for (unsigned r = 0; r < kDropReasonCount; ++r) {
    const uint64_t d = cur.ports[0].drops[r] + cur.ports[1].drops[r] - prev.ports[0].drops[r] - prev.ports[1].drops[r];
    if (d) drops += fmt::format(" {}={:.0f}/s", kDropReasonNames[r], per_sec(d, s));
  }
  return fmt::format("rx {:.3f} Mpps {:.1f} Mbit/s | tx {:.3f} Mpps {:.1f} Mbit/s (wire {:.1f}, host {:.1f}) | drops{}",
                     per_sec(rx, s) / 1e6, mbit(rx_bytes, s), per_sec(tx, s) / 1e6, mbit(tx_bytes, s),
                     mbit(cur.ports[0].tx_bytes - prev.ports[0].tx_bytes, s),
                     mbit(cur.ports[1].tx_bytes - prev.ports[1].tx_bytes, s), drops.empty() ? " none" : drops);
}

std::string format_job_rates(const Totals& prev, const Totals& cur, double s, const Snapshot& snap, double uptime,
                             const std::vector<uint32_t>& prev_job_of_slot) {
  // "demand" is what the job offered after its ingress policer; "sent" what
  // left psgate. Pull (PS -> workers) is the direction that contends at the PS host.
  std::string out =
      fmt::format("{:>7}  {:<22} {:>5} {:>13} {:>13} {:>13} {:>13} {:>10} {:>10}\n", fmt::format("{:.1f}s", uptime),
                  "job", "class", "pull demand", "pull sent", "push demand", "push sent", "policed/s", "drops/s");
  for (const JobEntry& job : snap.jobs) {
    const JobTotals& a = prev.jobs[job.slot];
    const JobTotals& b = cur.jobs[job.slot];
    // A slot that changed owner since `prev` restarted from 0 (its baseline
    // was reset): what it holds now is all this interval's, not a difference
    // with the previous owner's counts (which wrapped when they were larger).
    const bool same_owner = job.slot >= prev_job_of_slot.size() || prev_job_of_slot[job.slot] == job.id;
    auto since = [same_owner](uint64_t now, uint64_t then) { return same_owner && now >= then ? now - then : now; };
    out +=
        fmt::format("{:>7}  {:<22} {:>5} {:>8.1f} Mb/s {:>8.1f} Mb/s {:>8.1f} Mb/s {:>8.1f} Mb/s {:>10.0f} {:>10.0f}\n",
                    "", job_label(job), snap.slots[job.slot].cls[kPull],
                    mbit(since(b.admitted_bytes[kPull], a.admitted_bytes[kPull]), s),
                    mbit(since(b.sent_bytes[kPull], a.sent_bytes[kPull]), s),
                    mbit(since(b.admitted_bytes[kPush], a.admitted_bytes[kPush]), s),
                    mbit(since(b.sent_bytes[kPush], a.sent_bytes[kPush]), s), per_sec(since(b.policed, a.policed), s),
                    per_sec(since(b.drops, a.drops), s));
  }
  return out;
}

std::string format_final_report(const Totals& t, const Snapshot& snap, const ConfigSpec& config) {
  std::string out = "\n== ports ==\n";
  out += fmt::format("{:<6}", "port");
  add_headings(out, kPortFields);
  add_headings(out, kNicFields);
  out += "\n";
  for (unsigned p = 0; p < kPortCount; ++p) {
    out += fmt::format("{:<6}", kPortNames[p]);
    add_values(out, kPortFields, t.ports[p]);
    add_values(out, kNicFields, t.ports[p].nic);
    out += "\n";
  }
  out += "\n== links ==\n";
  for (unsigned p = 0; p < kPortCount; ++p) out += fmt::format("{:<6} {}\n", kPortNames[p], link_text(t.ports[p].link));
  out += "\n== drops by reason (by egress port) ==\n";
  out += fmt::format("{:<18} {:>12} {:>12}\n", "reason", "wire", "host");
  for (unsigned r = 0; r < kDropReasonCount; ++r) {
    out += fmt::format("{:<18} {:>12} {:>12}\n", kDropReasonNames[r], t.ports[0].drops[r], t.ports[1].drops[r]);
  }
  out += "\n== classes (egress port / class) ==\n";
  out += fmt::format("{:<6} {:>5}", "port", "class");
  add_headings(out, kClassFields);
  out += fmt::format(" {:>10} {:>10} {:>10}\n", "p50 us", "p99 us", "p99.9 us");
  for (unsigned p = 0; p < kPortCount; ++p) {
    for (unsigned c = 0; c < t.class_count; ++c) {
      const ClassTotals& ct = t.cls(p, c);
      if (ct.enqueued_packets == 0 && ct.drop_queue_full == 0 && ct.drop_ring_full == 0) continue;
      out += fmt::format("{:<6} {:>5}", kPortNames[p], c);
      add_values(out, kClassFields, ct);
      out += fmt::format(" {:>10.1f} {:>10.1f} {:>10.1f}\n", ct.sojourn.percentile(0.5) / 1e3,
                         ct.sojourn.percentile(0.99) / 1e3, ct.sojourn.percentile(0.999) / 1e3);
    }
  }
  out += "\n== jobs ==\n";
  out += fmt::format("{:<22} {:>5} {:>5}", "job", "rank", "class");
  for (Direction dir : kReportDirections)
    add_headings(out, kJobDirectionFields, std::string(kDirectionNames[dir]) + " ");
  add_headings(out, kJobFields);
  out += "\n";
  for (const JobEntry& job : snap.jobs) {
    const JobTotals& jt = t.jobs[job.slot];
    out += fmt::format("{:<22} {:>5} {:>5}", job_label(job), job.rank, snap.slots[job.slot].cls[kPull]);
    for (Direction dir : kReportDirections) add_values(out, kJobDirectionFields, jt, dir);
    add_values(out, kJobFields, jt);
    out += "\n";
  }
  (void)config;
  const FlowCacheTotals& fc = t.flow_cache;
  const uint64_t lookups = fc.hits + fc.misses;
  out += fmt::format("\nflow cache: {} hits, {} misses ({:.2f}% hit), {} evictions{}\n", fc.hits, fc.misses,
                     lookups ? 100.0 * static_cast<double>(fc.hits) / static_cast<double>(lookups) : 0.0, fc.evictions,
                     fc.evictions ? " (more flows than dataplane.flow_cache holds well)" : "");
  out += fmt::format("\nconservation: received {} = transmitted {} + dropped {} : {}\n", t.rx_total(), t.tx_total(),
                     t.drop_total(), conservation_holds(t) ? "OK" : "MISMATCH");
  return out;
}

struct BackgroundPrinter::State {
  explicit State(std::FILE* o) : out(o) {}
  std::FILE* const out;
  std::mutex mutex;
  std::condition_variable wake;      // the writer: a table, the last text or the end
  std::condition_variable finished;  // finish(): the writer is done
  // Under mutex:
  std::string waiting;
  bool has_waiting = false, stopping = false, done = false;
  std::string last;
  bool has_last = false;
  int last_error = 0;  // errno of the last text's failed write, 0 when written
  uint64_t skipped = 0;
};

BackgroundPrinter::BackgroundPrinter(std::FILE* out)
    : state_(std::make_shared<State>(out)), thread_([state = state_] { run(state); }) {}

BackgroundPrinter::~BackgroundPrinter() {
  if (!thread_.joinable()) return;  // finish() joined it, or left it held in a write
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_one();
  thread_.join();
}

void BackgroundPrinter::print(std::string text) {
  {
    std::lock_guard lock(state_->mutex);
    if (state_->has_waiting) ++state_->skipped;
    state_->waiting = std::move(text);
    state_->has_waiting = true;
  }
  state_->wake.notify_one();
}

uint64_t BackgroundPrinter::skipped() const {
  std::lock_guard lock(state_->mutex);
  return state_->skipped;
}

BackgroundPrinter::Finished BackgroundPrinter::finish(std::string last, std::chrono::milliseconds limit) {
  std::unique_lock lock(state_->mutex);
  state_->last = std::move(last);
  state_->has_last = true;
  state_->stopping = true;
  state_->wake.notify_one();
  if (!state_->finished.wait_for(lock, limit, [this] { return state_->done; })) {
    lock.unlock();
    thread_.detach();  // it holds its own reference to the state
    return {Outcome::kHeld, 0};
  }
  const int error = state_->last_error;
  lock.unlock();
  thread_.join();
  return {error == 0 ? Outcome::kWritten : Outcome::kFailed, error};
}

void BackgroundPrinter::run(const std::shared_ptr<State>& state) {
  std::unique_lock lock(state->mutex);
  for (;;) {
    state->wake.wait(lock, [&] { return state->has_waiting || state->has_last || state->stopping; });
    std::string text;
    bool is_last = false;
    if (state->has_waiting) {  // the newest table goes out before the last text
      text = std::move(state->waiting);
      state->has_waiting = false;
    } else if (state->has_last) {
      text = std::move(state->last);
      state->has_last = false;
      is_last = true;
    } else {  // stopping, nothing left
      state->done = true;
      state->finished.notify_all();
      return;
    }
    lock.unlock();
    errno = 0;
    const bool written = std::fputs(text.c_str(), state->out) >= 0 && std::fflush(state->out) == 0;
    const int error = written ? 0 : (errno != 0 ? errno : EIO);
    lock.lock();
    if (is_last) state->last_error = error;
  }
}

}  // namespace psgate
