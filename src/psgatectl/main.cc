// SPDX-License-Identifier: BSD-3-Clause
// psgatectl: parse the command line, send one request, print the reply.
// Exit status as in docs/control-protocol.md: 0 ok, 1 refused, 2 usage, 3 unreachable.
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <optional>
#include <thread>

#include "client.h"
#include "commands.h"
#include "format.h"
#include "jobs_file.h"
#include "protocol_check.h"
#include "psgate/control_commands.h"
#include "psgate/control_request.h"  // kMaxRequestBytes
#include "psgate/output_file.h"
#include "reply_shape.h"

namespace {

using namespace psgatectl;
using Clock = std::chrono::steady_clock;

volatile std::sig_atomic_t g_interrupted = 0;

void on_sigint(int) { g_interrupted = 1; }

// The exit status for a reply that did not come back or was refused (its
// reason on stderr), or 0 for an accepted one.
int failure_status(const psgate::Result<Reply>& reply) {
  if (!reply) {
    std::cerr << "psgatectl: " << reply.error() << "\n";
    return kExitUnreachable;
  }
  if (!reply->ok) {
    std::cerr << "psgatectl: " << reply->error << "\n";
    return kExitRefused;
  }
  return kExitOk;
}

// psgatectl's words for the command sent: "jobs rm", "class".
std::string command_words(const Invocation& inv) {
  return psgate::find_control_command(inv.request["cmd"].get<std::string>())->cli;
}

// The reply's result checked against what its table reads (reply_shape.h):
// "" when usable, else the reason, naming the socket as the client's errors do.
std::string shape_problem(const Invocation& inv, const ojson& result) {
  auto shape = check_reply_shape(inv.kind, command_words(inv), result);
  return shape ? "" : "psgate at " + inv.socket + ": " + shape.error();
}

// "HH:MM:SS", local time, for frame headers and outage lines.
std::string clock_text() {
  char text[16] = "";
  const std::time_t wall = std::time(nullptr);
  std::tm tm{};
  localtime_r(&wall, &tm);
  std::strftime(text, sizeof text, "%H:%M:%S", &tm);
  return text;
}

// Sleeps until `until` or a Ctrl-C/SIGTERM, whichever comes first.
void sleep_until(Clock::time_point until) {
  while (!g_interrupted && Clock::now() < until) {
    const auto left = until - Clock::now();
    std::this_thread::sleep_for(std::min<Clock::duration>(left, std::chrono::milliseconds(50)));
  }
}

std::string ms_text(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + "s" : std::to_string(d.count()) + "ms";
}

// stats --watch: a stats request every second, a frame per reply computed
// from the difference to the previous one. It is a monitor, so it outlives
// the daemon's hiccups: a connection that cannot be made or is closed, a
// daemon of another protocol (asked on each connection, protocol_check.h), a
// reply that is late (--timeout), missing, malformed or a refusal are each reported
// on stderr as one line with the time, and it reconnects (a fresh connection:
// a late reply must not be taken for the next one) after a backoff of 100 ms,
// doubling to 2 s while the outage lasts, and goes on. Only Ctrl-C or SIGTERM
// (or --count frames) end it, with status 0. The terminal is cleared between
// frames only when stdout is one.
int watch(const Invocation& inv) {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  set_interrupt_flag(&g_interrupted);
  const bool tty = isatty(STDOUT_FILENO) == 1;
  constexpr std::chrono::milliseconds kFirstBackoff{100}, kMaxBackoff{2000};

  std::optional<Client> client;
  auto backoff = kFirstBackoff;
  bool outage = false;  // since the last frame, something failed
  ojson prev;
  bool have_prev = false;
  Clock::time_point prev_at{};
  auto next_at = Clock::now();
  uint64_t frames = 0;
  // Reports a failure, drops the connection and waits out the backoff.
  auto trouble = [&](const std::string& what) {
    client.reset();
    outage = true;
    std::cerr << "psgatectl: " << clock_text() << " " << what << "; reconnecting in " << ms_text(backoff) << "\n"
              << std::flush;
    sleep_until(Clock::now() + backoff);
    backoff = std::min(backoff * 2, kMaxBackoff);
    next_at = Clock::now();  // the next frame as soon as the daemon answers
  };
  while (!g_interrupted && (inv.watch_count == 0 || frames < inv.watch_count)) {
    sleep_until(next_at);
    if (g_interrupted) break;
    if (!client) {
      auto c = Client::connect(inv.socket, std::chrono::milliseconds(inv.timeout_ms));
      if (g_interrupted) break;
      if (!c) {
        trouble(c.error());
        continue;
      }
      const ProtocolCheck checked =
          check_protocol(*c, inv.socket, "stats", Clock::now() + std::chrono::milliseconds(inv.timeout_ms));
      if (g_interrupted) break;
      if (checked.status == kExitRefused) {
        trouble("psgate at " + inv.socket + " refused health: " + checked.why);
        continue;
      }
      if (checked.status != kExitOk) {
        trouble(checked.why);
        continue;
      }
      client.emplace(std::move(*c));
    }
    next_at = std::max(next_at + std::chrono::seconds(1), Clock::now());
    auto reply = client->call(inv.request);
    if (g_interrupted) break;
    if (!reply) {
      trouble(reply.error());
      continue;
    }
    if (!reply->ok) {
      trouble("psgate at " + inv.socket + " refused stats: " + reply->error);
      continue;
    }
    // A reply of another shape would print an empty frame as if no job ran.
    if (const std::string bad = shape_problem(inv, reply->result); !bad.empty()) {
      trouble(bad);
      continue;
    }
    if (outage) std::cerr << "psgatectl: " << clock_text() << " psgate at " << inv.socket << " answers again\n";
    outage = false;
    backoff = kFirstBackoff;
    const auto now = Clock::now();
    const double dt = have_prev ? std::chrono::duration<double>(now - prev_at).count() : 0;
    std::string frame = tty ? "\x1b[H\x1b[2J" : (frames > 0 ? "\n" : "");
    frame += "psgate stats  " + clock_text() + "  (every 1 s; Ctrl-C to stop)\n";
    // A counter that went back (the daemon restarted) shows "-", not a rate.
    frame += format_watch(have_prev ? &prev : nullptr, reply->result, dt);
    std::cout << frame << std::flush;
    // Output that fails (a closed or full stdout) ends the watch: main says
    // so and exits 1, rather than polling the daemon for nobody until Ctrl-C.
    if (!std::cout) break;
    prev = std::move(reply->result);
    prev_at = now;
    have_prev = true;
    ++frames;
  }
  return kExitOk;
}

// jobs load: the file in as many jobs.load requests as the line limit needs,
// one after another on one connection. Each is all-or-nothing; on a refusal
// the jobs of the requests before it stay loaded and none after it is sent.
// `first_deadline`: the first request's, shared with the protocol check.
int load_jobs(Client& client, const Invocation& inv, Clock::time_point first_deadline) {
  const nlohmann::json& jobs = inv.request["jobs"];
  auto groups = split_jobs(jobs, psgate::kMaxRequestBytes);
  if (!groups) {
    std::cerr << "psgatectl: " << groups.error() << "\n";
    return kExitUsage;
  }
  size_t done = 0;
  // --json: the replies as one, in the daemon's shape ({"added": [ids]}, and
  // the last store_revision in cluster mode), with the number of requests.
  nlohmann::ordered_json merged{{"added", nlohmann::ordered_json::array()}};
  for (size_t g = 0; g < groups->size(); ++g) {
    const size_t n = (*groups)[g].size();
    const nlohmann::json request{{"cmd", "jobs.load"}, {"jobs", std::move((*groups)[g])}};
    auto reply = g == 0 ? client.call(request, first_deadline) : client.call(request);
    // The daemon names a job by its place in the request ("jobs[48]: ..."):
    // said by its place in the file, which is what the operator has open.
    if (reply && !reply->ok && reply->error.rfind("jobs[", 0) == 0) {
      const size_t close = reply->error.find(']');
      size_t index = 0;
      const char* first = reply->error.data() + 5;
      const char* last = reply->error.data() + (close == std::string::npos ? 5 : close);
      if (auto [end, ec] = std::from_chars(first, last, index); ec == std::errc() && end == last && end != first)
        reply->error.replace(5, close - 5, std::to_string(index + done));
      // "none added" is the request's: of a file sent in several, the jobs
      // of the requests before it stay (said on the next line).
      const std::string none = "; none added";
      if (groups->size() > 1 && reply->error.ends_with(none))
        reply->error.replace(reply->error.size() - none.size(), none.size(), "; none of this request's jobs added");
    }
    int status = failure_status(reply);
    // A reply of another shape is no count of jobs loaded (nor, with
    // --json, a list of them to merge): applied or not, psgatectl cannot tell.
    if (status == kExitOk) {
      if (const std::string bad = shape_problem(inv, reply->result); !bad.empty()) {
        std::cerr << "psgatectl: " << bad << "\n";
        status = kExitUnreachable;
      }
    }
    if (status != kExitOk) {
      // Refused: not applied. No reply: perhaps applied, perhaps not.
      std::cerr << "psgatectl: request " << g + 1 << " of " << groups->size() << " (the file's jobs[" << done << ".."
                << done + n - 1 << "]) "
                << (status == kExitRefused ? "was not applied"
                                           : "got no usable answer, so it may or may not have been applied")
                << "; " << done << " job" << (done == 1 ? "" : "s")
                << " before it were loaded, none after it was sent\n";
      // A script learns which jobs went in: what was added, and how many
      // requests were applied (the one named above was not, or may not be).
      if (inv.json_output) {
        merged["requests"] = groups->size();
        merged["requests_applied"] = g;
        std::cout << merged.dump(2) << "\n";
      }
      return status;
    }
    done += n;
    for (const auto& [key, value] : reply->result.items()) {
      if (key != "added") merged[key] = value;
      else  // an array of ids: its shape was checked
        for (const auto& id : value) merged["added"].push_back(id);
    }
  }
  merged["requests"] = groups->size();
  if (inv.json_output) std::cout << merged.dump(2) << "\n";
  else
    std::cout << "added " << done << " job" << (done == 1 ? "" : "s") << " in " << groups->size() << " request"
              << (groups->size() == 1 ? "" : "s") << "\n";
  return kExitOk;
}

}  // namespace

static int run_command(int argc, char** argv) {
  ParseOutcome parsed = parse_command_line(argc, argv, std::getenv("PSGATE_SOCKET"));
  if (!parsed.invocation) {
    std::cout << parsed.out << std::flush;
    std::cerr << parsed.err << std::flush;
    return parsed.exit_code;
  }
  const Invocation& inv = *parsed.invocation;
  if (inv.kind == Kind::kStatsWatch) return watch(inv);  // connects (and reconnects) itself

  auto client = Client::connect(inv.socket, std::chrono::milliseconds(inv.timeout_ms));
  if (!client) {
    std::cerr << "psgatectl: " << client.error() << "\n";
    return kExitUnreachable;
  }
  // One wait for the reply, the protocol check included.
  const auto deadline = Clock::now() + std::chrono::milliseconds(inv.timeout_ms);
  // health is the check itself: its reply says the protocol (checked below).
  if (inv.kind != Kind::kHealth) {
    const ProtocolCheck checked = check_protocol(*client, inv.socket, command_words(inv), deadline);
    if (checked.status != kExitOk) {
      std::cerr << "psgatectl: " << checked.why << "\n";
      return checked.status;
    }
  }
  if (inv.kind == Kind::kJobsLoad) return load_jobs(*client, inv, deadline);

  auto reply = client->call(inv.request, deadline);
  if (const int status = failure_status(reply); status != kExitOk) return status;
  // health --json prints the reply as it came whatever the protocol: it is
  // how an operator learns which one the daemon speaks.
  if (inv.kind == Kind::kHealth && !inv.json_output) {
    if (const std::string mismatch = protocol_mismatch(reply->result); !mismatch.empty()) {
      std::cerr << "psgatectl: psgate at " << inv.socket << mismatch
                << " (`psgatectl health --json` prints its reply as it came)\n";
      return kExitUnreachable;
    }
  }
  // A table of a reply of another shape prints "-" and "(no jobs)" and exits
  // 0: version skew that looks like an empty gateway. --json prints the
  // result as it came, for the reader to judge.
  if (!inv.json_output) {
    if (const std::string bad = shape_problem(inv, reply->result); !bad.empty()) {
      std::cerr << "psgatectl: " << bad << "\n";
      return kExitUnreachable;
    }
  }
  if (inv.json_output) {
    std::cout << reply->result.dump(2) << "\n";
  } else if (inv.kind == Kind::kConfigToml) {
    auto text = format_config_toml(reply->result);
    if (!text) {
      std::cerr << "psgatectl: " << text.error() << "\n";
      return kExitRefused;
    }
    std::cout << *text;
  } else {
    std::cout << format_result(inv.kind, inv.request, reply->result);
  }
  std::cout << std::flush;
  return kExitOk;
}

int main(int argc, char** argv) {
  psgate::open_closed_standard_fds(/*output_fails=*/true);
  int status;
  try {
    status = run_command(argc, argv);
  } catch (const nlohmann::json::exception& e) {
    // A reply that is JSON but not of the shape this psgatectl reads (a
    // daemon of another version, or not psgate): no usable reply, as for
    // garbage, rather than an abort.
    std::cerr << "psgatectl: the daemon's reply is not one this psgatectl understands: " << e.what() << "\n";
    return kExitUnreachable;
  }
  // What was printed must have reached its file: `psgatectl config --toml >
  // now.toml` on a full disk would otherwise leave a cut file and exit 0.
  errno = 0;
  std::cout.flush();
  if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::cerr << "psgatectl: cannot write the output" << (errno ? std::string(": ") + std::strerror(errno) : "")
              << "\n";
    return status == kExitOk ? kExitRefused : status;
  }
  return status;
}
