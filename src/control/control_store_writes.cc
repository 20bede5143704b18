// SPDX-License-Identifier: BSD-3-Clause
// Changes forwarded to the cluster store without holding the control thread
// (control_plane.h: handle_line_deferred). The store's answer takes up to a
// second per member tried, and the change's return through the watch up to
// 2 s more: on the control thread, as handle_line does it, every other
// client's request, the tick (policy, the store's view, the registration)
// and the service watchdog waited that long. Here the write runs on a thread
// of its own, one at a time; the control thread goes on and collects the
// reply when the write ends and its revision is in force.
//
//   handle_line_deferred --> a read, a local change: the reply at once
//                        --> a store change: send_store_write (a thread)
//                        --> a change while one is out: waiting (a line)
//   take_deferred_replies --> advance_store_writes: the write taken, the
//                             wait for its revision, the next line
#include <unistd.h>

#include <chrono>
#include <exception>
#include <future>
#include <system_error>
#include <utility>

#include <spdlog/spdlog.h>

#include "psgate/control_plane.h"

namespace psgate {

using json = nlohmann::json;

ControlPlane::~ControlPlane() {
  // The write's thread uses the link and done_fd: it ends first (cancelled:
  // a stop does not wait for the store's deadline). The replies have
  // nobody to go to. (A reply that cannot be built, bad_alloc, is after
  // the thread's join: nothing is left running.)
  try {
    (void)end_store_writes(0);
  } catch (...) {
  }
  if (store_writes_.done_fd >= 0) ::close(store_writes_.done_fd);
}

std::optional<json> ControlPlane::handle_line_deferred(std::string_view line, uint64_t token, bool reply_wanted,
                                                       const CommandSpec** ran) {
  // Without a descriptor to say a write ended, the server would never
  // collect it: the blocking way then (eventfd failed at follow_cluster).
  const bool can_defer = cluster_ != nullptr && store_writes_.done_fd >= 0;
  Handled h = handle_request(line, reply_wanted, ran, can_defer);
  if (h.queued) {
    store_writes_.waiting.push_back({token, std::string(line), reply_wanted});
    return std::nullopt;
  }
  if (!h.for_store) return reply_object(h);
  if (!can_defer) {
    h.reply = forward_to_cluster(*h.for_store);
    return reply_object(h);
  }
  send_store_write(token, std::move(h));
  // Nothing to write, or the store unreachable: ready at once, but handed
  // out like the others (the server collects after every round).
  return std::nullopt;
}

void ControlPlane::send_store_write(uint64_t token, Handled h) {
  auto ready_now = [&](Result<json> reply) {
    h.reply = std::move(reply);
    store_writes_.ready.push_back({token, reply_object(h)});
  };
  auto w = store_write_of(*h.for_store);
  if (!w) return ready_now(Result<json>::failure(w.error()));
  if (w->empty()) return ready_now(h.for_store->reply(*this));
  StoreWrites::InFlight out;
  out.token = token;
  out.at = write_start();
  std::promise<Result<int64_t>> result;
  out.revision = result.get_future();
  try {
    out.thread = std::thread(
        [link = cluster_, write = std::move(*w), fd = store_writes_.done_fd, result = std::move(result)]() mutable {
          // The result first, then the word: the control thread woken by
          // done_fd must find it ready (a wake-up before it would be lost,
          // the reply left for the next tick).
          try {
            result.set_value(link->write(write));
          } catch (...) {
            result.set_exception(std::current_exception());
          }
          const uint64_t one = 1;
          (void)!::write(fd, &one, sizeof one);
        });
  } catch (const std::system_error& e) {
    // No thread to be had: nothing was sent.
    return ready_now(Result<json>::failure(std::string("cannot send the change to the cluster store: ") + e.what() +
                                           "; nothing written"));
  }
  out.handled = std::move(h);
  store_writes_.in_flight = std::move(out);
}

Result<int64_t> ControlPlane::collect_store_write(StoreWrites::InFlight& out) {
  Result<int64_t> revision = Result<int64_t>::failure("");
  try {
    revision = out.revision.get();
  } catch (const std::exception& e) {
    revision = Result<int64_t>::failure(std::string("internal error: ") + e.what());
  }
  // Its last step (done_fd) is all that is left of it.
  if (out.thread.joinable()) out.thread.join();
  return revision;
}

bool ControlPlane::advance_store_writes(uint64_t now_ns) {
  StoreWrites& sw = store_writes_;
  if (!sw.in_flight) {
    if (sw.waiting.empty()) return false;
    // The next change asked for, handled on the state the last one left.
    StoreWrites::Waiting next = std::move(sw.waiting.front());
    sw.waiting.pop_front();
    Handled h = handle_request(next.line, next.reply_wanted, nullptr, false);
    if (h.for_store) send_store_write(next.token, std::move(h));
    else sw.ready.push_back({next.token, reply_object(h)});
    return true;
  }
  StoreWrites::InFlight& out = *sw.in_flight;
  if (!out.written) {
    if (out.revision.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
    const Result<int64_t> revision = collect_store_write(out);
    if (!revision) {
      out.handled.reply = Result<json>::failure(revision.error());
      sw.ready.push_back({out.token, reply_object(out.handled)});
      sw.in_flight.reset();
      return true;
    }
    out.written = *revision;
    out.until_ns = now_ns + kWrittenReplyWaitNs;
  }
  const bool applied = in_force(out.at, *out.written);
  if (!applied && now_ns < out.until_ns) {
    // The tick and the store's wake-ups apply the store's views meanwhile;
    // one may be waiting already.
    if (!follow_step(now_ns) || !in_force(out.at, *out.written)) return false;
  }
  out.handled.reply = written_reply(*out.handled.for_store, *out.written, in_force(out.at, *out.written));
  sw.ready.push_back({out.token, reply_object(out.handled)});
  sw.in_flight.reset();
  return true;
}

std::vector<ControlPlane::DeferredReply> ControlPlane::take_deferred_replies(uint64_t now_ns) {
  StoreWrites& sw = store_writes_;
  // (done_fd is drained by the server whenever epoll reports it: read only
  // here, it stayed readable after a write collected without its wake-up,
  // and the level-triggered loop spun.)
  if (!sw.in_flight && sw.waiting.empty() && sw.ready.empty()) return {};
  for (;;) {
    // The token whose step this is: a step that throws (a reply's
    // rendering, a compile in the next line's handling) costs that request
    // an error reply, never its client's wait for ever.
    const uint64_t token = sw.in_flight ? sw.in_flight->token : !sw.waiting.empty() ? sw.waiting.front().token : 0;
    try {
      if (!advance_store_writes(now_ns)) break;
    } catch (const std::exception& e) {
      spdlog::error("control: a change for the cluster store failed: {}", e.what());
      // (A waiting line is taken off the queue before it is handled.)
      if (sw.in_flight && sw.in_flight->token == token) {
        if (sw.in_flight->thread.joinable()) sw.in_flight->thread.join();
        sw.in_flight.reset();
      }
      sw.ready.push_back({token, json{{"ok", false}, {"error", std::string("internal error: ") + e.what()}}});
    }
  }
  return std::exchange(sw.ready, {});
}

std::vector<ControlPlane::DeferredReply> ControlPlane::end_store_writes(uint64_t wait_ns) {
  StoreWrites& sw = store_writes_;
  std::vector<DeferredReply> out = std::exchange(sw.ready, {});
  if (sw.in_flight) {
    StoreWrites::InFlight& w = *sw.in_flight;
    Result<json> reply = Result<json>::failure("");
    if (!w.written && w.revision.wait_for(std::chrono::nanoseconds(wait_ns)) != std::future_status::ready) {
      // The store has not answered: the gateway does not wait for its
      // deadline (up to a second a member) to stop.
      cluster_->cancel_calls();
      (void)collect_store_write(w);
      reply = Result<json>::failure(
          "the gateway stopped while the change was out to the cluster store: it may or may not have been "
          "written; read the jobs back (psgatectl jobs list) before retrying");
    } else {
      // (Called from the control thread's end and a destructor: nothing
      // may escape.)
      try {
        const Result<int64_t> revision = w.written ? Result<int64_t>(*w.written) : collect_store_write(w);
        if (revision) reply = written_reply(*w.handled.for_store, *revision, in_force(w.at, *revision));
        else reply = Result<json>::failure(revision.error());
      } catch (const std::exception& e) {
        reply = Result<json>::failure(std::string("internal error: ") + e.what());
      }
    }
    if (w.thread.joinable()) w.thread.join();
    w.handled.reply = std::move(reply);
    out.push_back({w.token, reply_object(w.handled)});
    sw.in_flight.reset();
  }
  for (StoreWrites::Waiting& line : sw.waiting) {
    Handled h;
    h.unseen = !line.reply_wanted;
    // Its "id" echoed, as every reply does (the line was never parsed as a
    // request: only the id is looked for).
    if (const json request = json::parse(line.line, nullptr, false); request.is_object() && request.contains("id"))
      h.echo_id = request["id"];
    h.reply = Result<json>::failure(
        "the gateway stopped before this change was sent to the cluster store: nothing "
        "written");
    out.push_back({line.token, reply_object(h)});
  }
  sw.waiting.clear();
  return out;
}

}  // namespace psgate
