// SPDX-License-Identifier: BSD-3-Clause
// The follow thread (etcd_link.h): the whole prefix read at one revision,
// page by page, then watched from there; read again when the watch ends.
#include "cluster/etcd_link.h"

#include <cstdlib>
#include <map>
#include <utility>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "cluster/etcd_calls.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace psgate {

namespace pb = etcdserverpb;
using namespace etcd_detail;

namespace {

constexpr uint64_t kReadDeadlineNs = 2000 * kMs;  // per page of a full read
// At one key a page, a value that takes longer than that to arrive (a very
// narrow link) is given up to this long (FullReadPages).
constexpr uint64_t kLongestReadDeadlineNs = 16000 * kMs;
// Keys per page of a full read, at most: at etcd's largest value (1.5 MiB
// by default) a page stays under the receive limit, and each page is a
// small read for etcd to build in memory, under its own deadline, so a
// large prefix reads in many short calls rather than one that never ends
// within the deadline. Pages of large values that still do not arrive in
// time are asked for in fewer keys (FullReadPages).
constexpr int64_t kReadPageKeys = 128;
// The first page's keys, and what a page should carry at most once the
// bytes a key are known (FullReadPages): pages of large values start small
// and stay near this size, rather than make etcd build hundreds of MB.
constexpr int64_t kFirstReadPageKeys = 16;
constexpr uint64_t kReadPageBytes = 64ull << 20;

// gRPC's own refusal of a message larger than the channel's receive limit
// ("Received message larger than max (283115587 vs. 268435456)"), not the
// store's ResourceExhausted (a request too large, "too many requests").
bool over_receive_limit(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
         s.error_message().find("Received message larger than max") != std::string::npos;
}

// The size over_receive_limit's message gives, or the limit where it gives none.
uint64_t received_size(const grpc::Status& s) {
  const std::string& m = s.error_message();
  const size_t open = m.find('(');
  if (open != std::string::npos) {
    const uint64_t n = std::strtoull(m.c_str() + open + 1, nullptr, 10);
    if (n > 0) return n;
  }
  return kStoreReceiveLimitBytes;
}

}  // namespace

// A full read compacted away under the follow thread, while paging or
// before its watch caught up: counted (FullReadFailures), and said in health
// once it happens again and again. The log says each until then, then that
// once: not a line every 5 s for as long as it lasts.
void EtcdLink::full_read_compacted(const std::string& what, const std::string& why) {
  bool became_trouble;
  std::string trouble;
  unsigned streak;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t t = now_ns();
    became_trouble = full_read_failures_.failed(t, why);
    trouble = full_read_failures_.problem(t);
    streak = full_read_failures_.streak();
  }
  if (became_trouble) {
    spdlog::warn("cluster: {} (health degraded until the prefix is read and followed again)", trouble);
  } else if (trouble.empty()) {
    spdlog::warn("cluster: {} ({} in a row): reading everything again", what, streak);
  }
}

void EtcdLink::view_followed() {
  unsigned failed_before;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failed_before = full_read_failures_.succeeded();
  }
  if (failed_before > 0)
    spdlog::info("cluster: the prefix read and followed again after {} full read(s) compacted away in a row",
                 failed_before);
}

// What the follow thread carries from one round (a full read, then the
// watch that follows it) to the next.
struct EtcdLink::Follow {
  Follow(size_t endpoint, std::vector<uint64_t> probed, const ClusterKeys& keys, unsigned class_count)
      : ep(endpoint),
        start_ids(std::move(probed)),
        mirror(keys, class_count),
        start(keys.all()),
        end(prefix_range_end(keys.all())) {}

  // Grows with each failure (sleep_backoff); back to the least once a
  // watch follows the view read (read_watch).
  uint64_t backoff = kMinBackoffNs;
  size_t ep;  // the member read and watched
  // What each endpoint answered at the start (start_endpoint), for the
  // first read's identity check only: later ones ask anew.
  std::vector<uint64_t> start_ids;
  StoreMirror mirror;
  const std::string start, end;  // the prefix's range
  // Kept from one full read to the next: a store whose pages had to be
  // smaller is read so from the start next time.
  FullReadPages pages{kFirstReadPageKeys, kReadPageKeys, kReadPageBytes, kReadDeadlineNs, kLongestReadDeadlineNs};
};

// One full read, as its pages arrive.
struct EtcdLink::FullRead {
  std::map<std::string, StoreEntry> entries;
  int64_t at = 0;        // the revision read at: the first page's
  uint64_t read_id = 0;  // the etcd cluster that answered (the first page's header)
  std::string from;      // the next page's first key
  grpc::Status status;   // the last call's; not ok: the read did not complete
};

// One watch call: a StoreCall without a deadline (the stream runs as long
// as the store has events to send; it ends when it fails, is cancelled for
// silence, or at the stop). The call is declared first, so that its context
// outlives the stream it runs.
struct EtcdLink::WatchCall {
  explicit WatchCall(StoreCall::Calls& calls) : call(calls, StoreCall::Unbounded{}) {}
  StoreCall call;
  std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream;
};

void EtcdLink::follow_loop() {
  std::vector<uint64_t> start_ids;
  const size_t first = start_endpoint(start_ids);
  Follow f(first, std::move(start_ids), keys_, class_count_);
  while (!stop_) {
    follow_endpoint_ = f.ep;
    auto ch = channel(f.ep, Lane::kFollow);
    // 1. Everything under the prefix, at one revision: page by page, each
    //    page at the first one's revision (what it read is the store then).
    FullRead read = read_prefix(f, ch);
    if (stop_) break;  // a read cut short is no view to publish
    if (!take_full_read(f, read)) continue;
    // 2. Every change after that revision.
    follow_watch(f, ch);
  }
}

// Gateways start on different members (by name), so that the watches are
// spread and one member's loss moves only its share of them.
// At the start every endpoint is asked at once which cluster it answers
// for: the first read goes to one that answers (the first from the
// name's pick on), not to a silent one that would hold it for its whole
// deadline, and that read's identity check takes these answers rather
// than asking again. One call deadline in all, however many are silent.
size_t EtcdLink::start_endpoint(std::vector<uint64_t>& start_ids) {
  size_t ep = std::hash<std::string>{}(spec_.name) % endpoints_.size();
  if (endpoints_.size() > 1) {
    start_ids = probe_cluster_ids(std::vector<bool>(endpoints_.size(), true));
    for (size_t k = 0; k < endpoints_.size(); ++k) {
      if (start_ids[(ep + k) % endpoints_.size()] != 0) {
        ep = (ep + k) % endpoints_.size();
        break;
      }
    }
  }
  return ep;
}

EtcdLink::FullRead EtcdLink::read_prefix(Follow& f, const std::shared_ptr<grpc::Channel>& ch) {
  auto kv = pb::KV::NewStub(ch);
  FullRead r;
  r.from = f.start;
  for (;;) {
    if (stop_) break;
    StoreCall call(calls_, f.pages.deadline_ns());
    pb::RangeRequest req;
    req.set_key(r.from);
    req.set_range_end(f.end);
    req.set_limit(f.pages.keys());
    req.set_revision(r.at);  // 0: the newest
    pb::RangeResponse resp;
    const uint64_t asked_ns = now_ns();
    r.status = kv->Range(&call.ctx(), req, &resp);
    if (!r.status.ok()) {
      if (stop_) break;
      if (f.pages.keys() == 1 && over_receive_limit(r.status)) {
        if (!read_key_without_value(f, r)) break;  // complete, or the member does not answer (r.status)
        continue;
      }
      if (!ask_smaller_pages(f, r)) break;
      continue;
    }
    f.pages.arrived(now_ns() - asked_ns, resp.kvs_size(), resp.ByteSizeLong());
    if (r.at == 0) {
      r.at = resp.header().revision();
      r.read_id = resp.header().cluster_id();
    }
    for (const auto& k : resp.kvs()) {
      // A key outside the layout is kept without its value (StoreMirror::put).
      r.entries[k.key()] = StoreEntry{f.mirror.keeps_value(k.key()) ? k.value() : std::string(), k.create_revision(),
                                      k.mod_revision(), k.lease()};
    }
    if (!resp.more() || resp.kvs_size() == 0) break;
    r.from = resp.kvs(resp.kvs_size() - 1).key() + '\0';  // the next key after the last read
  }
  return r;
}

// One key's value is larger than this gateway may receive: no page, however
// small or long, can bring it. Asked again and again (each time etcd built
// the whole value to send), it left the gateway "store unreachable" for
// good, the store answering. Read without its value: a key outside the
// layout is ignored as ever, a document is refused, naming its size.
bool EtcdLink::read_key_without_value(Follow& f, FullRead& r) {
  const uint64_t bytes = received_size(r.status);
  grpc::Status failed;
  auto k = first_key(f.ep, r.from, f.end, r.at, failed);
  if (!k) {
    // Said as what failed (a compaction past r.at, OUT_OF_RANGE, is taken
    // as one), not as the page too large to receive.
    r.status = failed;
    return false;
  }
  if (k->key.empty()) {
    // The member answered and holds no key from there: the one too large
    // was deleted since the page was asked for (read at the newest
    // revision, no page having come yet), as the warning below tells the
    // operator to do, and none follows it. The read is complete; counting
    // it as "store unreachable" moved to the next member, after a backoff,
    // for an answer.
    if (r.at == 0) {
      r.at = k->revision;
      r.read_id = k->cluster_id;
    }
    spdlog::info(
        "cluster: the key holding a value too large to receive was deleted meanwhile (no key after it at "
        "revision {}): the full read is complete without it",
        r.at);
    r.status = grpc::Status::OK;
    return false;
  }
  if (r.at == 0) {
    // Read at the newest revision: the key too large may have been deleted
    // since the page was asked for, and this be the one after it, whose
    // value is no larger than any other's. The page is asked again at this
    // revision (from here on the read's), where it is this key's.
    r.at = k->revision;
    r.read_id = k->cluster_id;
    return true;
  }
  const bool document = f.mirror.keeps_value(k->key);
  k->entry.value = document ? unreceived_value(bytes) : std::string();
  spdlog::warn(
      "cluster: {} holds a value of about {} bytes, more than the {} this gateway can receive: read without "
      "it ({}); delete or shrink it (etcdctl del {})",
      k->key, bytes, kStoreReceiveLimitBytes,
      document ? "refused as a document" : "ignored, as is every key outside the layout", k->key);
  r.entries[k->key] = std::move(k->entry);
  r.from = k->key + '\0';
  return true;
}

bool EtcdLink::ask_smaller_pages(Follow& f, const FullRead& r) {
  if (r.status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED &&
      r.status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED)
    return false;
  // Late or larger than the receive limit: too much at once for this store
  // or link, or a member that no longer answers. The pages get smaller
  // either way (they grow back once pages arrive in time); a member that
  // answers is asked again at once.
  const int64_t left = keys_left(f.ep, r.from, f.end, r.at);
  const int64_t asked = f.pages.keys();
  const uint64_t allowed_ns = f.pages.deadline_ns();
  const bool smaller = f.pages.too_large(left > 0 ? left : 0);
  if (left < 0 || !smaller) return false;
  spdlog::info(
      "cluster: a page of {} key(s) of the full read from {} did not arrive ({} within {} ms; {} key(s) "
      "still to read): asking for {} key(s) a page, within {} ms",
      asked, endpoints_[f.ep].target, status_text(r.status), allowed_ns / kMs, left, f.pages.keys(),
      f.pages.deadline_ns() / kMs);
  return true;
}

bool EtcdLink::take_full_read(Follow& f, FullRead& r) {
  // The start-up answers serve the first read only: later ones ask anew.
  const std::vector<uint64_t> probed = std::exchange(f.start_ids, {});
  if (!r.status.ok()) {
    // Compacted past the first page's revision while paging: start over at
    // the newest, on this member (it answers).
    const bool compacted = r.status.error_code() == grpc::StatusCode::OUT_OF_RANGE;
    if (compacted) {
      full_read_compacted(fmt::format("full read compacted at revision {} while paging", r.at), status_text(r.status));
      sleep_backoff(f.backoff);
      return false;
    }
    set_connected(false, endpoints_[f.ep].target + ": " + status_text(r.status));
    next_endpoint(f);
    return false;
  }
  bool replaced = false;
  if (!store_followable(f.ep, r.read_id, replaced, probed)) {
    std::string why;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      why = foreign_store_;
    }
    set_connected(false, why);
    next_endpoint(f);
    return false;
  }
  const int64_t before = f.mirror.revision();
  f.mirror.reset(std::move(r.entries), r.at, replaced);
  if (f.mirror.revision() < before) {
    spdlog::warn(
        "cluster: the store's revision went back from {} to {} (restored from a snapshot, or another "
        "cluster at these endpoints?): following it from there",
        before, f.mirror.revision());
  }
  publish_view(f.mirror);
  set_connected(true, "");
  std::lock_guard<std::mutex> lock(mutex_);
  ++full_reads_;
  return true;
}

void EtcdLink::next_endpoint(Follow& f) {
  drop_channel(f.ep, Lane::kFollow);
  f.ep = (f.ep + 1) % endpoints_.size();
  sleep_backoff(f.backoff);
}

namespace {

// The watch of the prefix from `revision` on.
pb::WatchRequest watch_create(const std::string& start, const std::string& end, int64_t revision) {
  pb::WatchRequest create;
  auto* c = create.mutable_create_request();
  c->set_key(start);
  c->set_range_end(end);
  c->set_start_revision(revision);
  c->set_progress_notify(true);
  // A response larger than etcd's --max-request-bytes comes in fragments
  // of at most that: a watch created behind the store's head (writes
  // while the prefix was read) is sent the revisions since in one
  // response of up to 1000 revisions, which over a narrow link took
  // longer than the silence deadline to arrive: the watch was cancelled,
  // the prefix read again, the next watch behind again, for as long as
  // the writes went on, never delivering a change. Fragments arrive.
  c->set_fragment(true);
  return create;
}

// A watch response's events, added to those of its fragments before
// (`pending`), with the bytes of the values kept (`pending_bytes`: those
// outside the layout are not).
void add_events(const pb::WatchResponse& resp, const StoreMirror& mirror, std::vector<WatchEvent>& pending,
                size_t& pending_bytes) {
  for (const auto& ev : resp.events()) {
    const auto& k = ev.kv();
    const bool keep = mirror.keeps_value(k.key());
    pending_bytes += k.key().size() + (keep ? k.value().size() : 0);
    pending.push_back(
        WatchEvent{ev.type() == mvccpb::Event::PUT, k.key(),
                   StoreEntry{keep ? k.value() : std::string(), k.create_revision(), k.mod_revision(), k.lease()}});
  }
}

// A whole response (its last fragment `resp`) with the events of all its
// fragments.
WatchMessage watch_message(const pb::WatchResponse& resp, std::vector<WatchEvent> events) {
  WatchMessage m;
  m.created = resp.created();
  m.canceled = resp.canceled();
  m.compact_revision = resp.compact_revision();
  m.revision = resp.header().revision();
  m.requested_progress = resp.watch_id() == -1;
  m.cancel_reason = resp.cancel_reason();
  m.events = std::move(events);
  return m;
}

}  // namespace

void EtcdLink::follow_watch(Follow& f, const std::shared_ptr<grpc::Channel>& ch) {
  auto watch = pb::Watch::NewStub(ch);
  WatchCall w(calls_);
  w.stream = watch->Watch(&w.call.ctx());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    watch_context_ = &w.call.ctx();
    last_watch_message_ns_ = now_ns();
  }
  const bool healthy = w.stream->Write(watch_create(f.start, f.end, f.mirror.revision() + 1));
  {
    // The session thread asks for progress through this (a Write may run
    // beside this thread's Read; writes are serialised by
    // watch_write_mutex_).
    std::lock_guard<std::mutex> lock(watch_write_mutex_);
    ask_progress_ = [s = w.stream.get()] {
      pb::WatchRequest r;
      r.mutable_progress_request();
      return s->Write(r);
    };
  }
  if (healthy) read_watch(f, w);
  const grpc::Status s = finish_watch(w);
  if (stop_) return;
  after_watch(f, s);
}

void EtcdLink::read_watch(Follow& f, WatchCall& w) {
  pb::WatchResponse resp;
  // The events of the response being received (of all its fragments so
  // far, for a fragmented one: a revision's events are applied together,
  // the whole response is), and the bytes of the values kept (those
  // outside the layout are not).
  std::vector<WatchEvent> pending;
  size_t pending_bytes = 0;
  bool created = false;
  bool current = false;  // the view is current (follow_state_): the watch is created and cannot be compacted away
  while (!stop_ && w.stream->Read(&resp)) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      last_watch_message_ns_ = now_ns();
    }
    bool became_current = false;
    if (resp.created()) {
      created = true;
      std::lock_guard<std::mutex> lock(mutex_);
      became_current = current = follow_state_.watch_created(resp.header().revision(), f.mirror.revision());
    }
    add_events(resp, f.mirror, pending, pending_bytes);
    // One message is at most that (gRPC's receive limit); fragments add up.
    if (pending_bytes > kStoreReceiveLimitBytes) {
      spdlog::warn(
          "cluster: a watch response of more than {} bytes of documents, in fragments: reading "
          "everything again",
          kStoreReceiveLimitBytes);
      break;
    }
    if (resp.fragment()) continue;  // more of this response to come
    const WatchMessage m = watch_message(resp, std::exchange(pending, {}));
    pending_bytes = 0;
    const WatchOutcome outcome = apply_watch_message(f.mirror, m);
    if (outcome == WatchOutcome::kReadAgain) {
      watch_read_again(f.mirror, m, current);
      break;
    }
    if (outcome == WatchOutcome::kChanged) {
      publish_view(f.mirror);
      std::lock_guard<std::mutex> lock(mutex_);
      events_ += m.events.size();
      if (follow_state_.watch_delivered()) became_current = current = true;
    }
    if (created) set_connected(true, "");
    // Followed from here: the next failure backs off from the start, and
    // reads compacted away before are over.
    if (became_current) {
      f.backoff = kMinBackoffNs;
      view_followed();
    }
  }
}

void EtcdLink::watch_read_again(const StoreMirror& mirror, const WatchMessage& m, bool current) {
  const std::string what =
      m.compact_revision > 0 ? "compacted at revision " + std::to_string(m.compact_revision) : "cancelled";
  // Compacted before it delivered anything: the read it was to follow was
  // compacted away as surely as one while paging, and a store compacted
  // between every read and its watch would otherwise be read again and
  // again, never followed, with health ok.
  if (m.compact_revision > 0 && !current) {
    full_read_compacted(
        fmt::format("the watch from revision {} {} before it delivered anything", mirror.revision() + 1, what),
        m.cancel_reason.empty() ? "watch " + what : m.cancel_reason);
  } else {
    spdlog::warn("cluster: watch {} ({}): reading everything again", what, m.cancel_reason);
  }
}

grpc::Status EtcdLink::finish_watch(WatchCall& w) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    watch_context_ = nullptr;
    ++watch_restarts_;
    // Still connected, maybe (a watch cancelled for silence or compacted),
    // but nothing after this view is delivered until the next watch: the
    // leader pauses (lead()).
    follow_state_.watch_ended();
  }
  {
    // No progress request runs on the stream past this point.
    std::lock_guard<std::mutex> lock(watch_write_mutex_);
    ask_progress_ = nullptr;
  }
  w.call.ctx().TryCancel();
  return w.stream->Finish();
}

void EtcdLink::after_watch(Follow& f, const grpc::Status& s) {
  if (over_receive_limit(s)) {
    // A change larger than this gateway can receive (one value, or etcd's
    // batch of many): the member answers, and a full read reads such a
    // value's key without it. Not "store unreachable".
    spdlog::warn(
        "cluster: the watch's message of about {} bytes is more than the {} this gateway can receive: "
        "reading everything again",
        received_size(s), kStoreReceiveLimitBytes);
    sleep_backoff(f.backoff);
  } else if (!s.ok() && s.error_code() != grpc::StatusCode::CANCELLED) {
    set_connected(false, endpoints_[f.ep].target + ": watch: " + status_text(s));
    next_endpoint(f);
  } else if (!s.ok()) {
    // Cancelled by the session thread (silent watch) or by the server: this
    // member may be cut off; try the next one.
    next_endpoint(f);
  }
}

namespace {

// A small read beside a full read's pages (a count, a key without its
// value): of [from, end) at `revision` (0: the newest), `shape` setting what
// it asks for. On the calls' connection (Lane), not behind what a late
// page left in flight on the follow thread's; under a page's deadline all
// the same: it shares the link with those bytes. In `calls` while it runs:
// the stop cancels it.
grpc::Status side_read(StoreCall::Calls& calls, const std::shared_ptr<grpc::Channel>& ch, const std::string& from,
                       const std::string& end, int64_t revision, const std::function<void(pb::RangeRequest&)>& shape,
                       pb::RangeResponse& resp) {
  auto kv = pb::KV::NewStub(ch);
  StoreCall call(calls, kReadDeadlineNs);
  pb::RangeRequest req;
  req.set_key(from);
  req.set_range_end(end);
  req.set_revision(revision);
  shape(req);
  return kv->Range(&call.ctx(), req, &resp);
}

}  // namespace

int64_t EtcdLink::keys_left(size_t ep, const std::string& from, const std::string& end, int64_t revision) {
  pb::RangeResponse resp;
  const grpc::Status s = side_read(
      calls_, channel(ep, Lane::kCalls), from, end, revision, [](pb::RangeRequest& r) { r.set_count_only(true); },
      resp);
  return s.ok() ? resp.count() : -1;
}

std::optional<EtcdLink::KeyOnly> EtcdLink::first_key(size_t ep, const std::string& from, const std::string& end,
                                                     int64_t revision, grpc::Status& failed) {
  pb::RangeResponse resp;
  failed = side_read(
      calls_, channel(ep, Lane::kCalls), from, end, revision,
      [](pb::RangeRequest& r) {
        r.set_limit(1);
        r.set_keys_only(true);
      },
      resp);
  if (!failed.ok()) return std::nullopt;
  KeyOnly k{{}, {}, resp.header().revision(), resp.header().cluster_id()};
  if (resp.kvs_size() > 0) {
    const auto& kv = resp.kvs(0);
    k.key = kv.key();
    k.entry = StoreEntry{std::string(), kv.create_revision(), kv.mod_revision(), kv.lease()};
  }
  return k;
}

}  // namespace psgate
