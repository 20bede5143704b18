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

void EtcdLink::follow_loop() {
  uint64_t backoff = kMinBackoffNs;
  // Gateways start on different members (by name), so that the watches are
  // spread and one member's loss moves only its share of them.
  size_t ep = std::hash<std::string>{}(spec_.name) % endpoints_.size();
  // At the start every endpoint is asked at once which cluster it answers
  // for: the first read goes to one that answers (the first from the
  // name's pick on), not to a silent one that would hold it for its whole
  // deadline, and that read's identity check takes these answers rather
  // than asking again. One call deadline in all, however many are silent.
  std::vector<uint64_t> start_ids;
  if (endpoints_.size() > 1) {
    start_ids = probe_cluster_ids(std::vector<bool>(endpoints_.size(), true));
    for (size_t k = 0; k < endpoints_.size(); ++k) {
      if (start_ids[(ep + k) % endpoints_.size()] != 0) {
        ep = (ep + k) % endpoints_.size();
        break;
      }
    }
  }
  StoreMirror mirror(keys_, class_count_);
  const std::string start = keys_.all(), end = prefix_range_end(keys_.all());
  // Kept from one full read to the next: a store whose pages had to be
  // smaller is read so from the start next time.
  FullReadPages pages(kFirstReadPageKeys, kReadPageKeys, kReadPageBytes, kReadDeadlineNs, kLongestReadDeadlineNs);
  while (!stop_) {
    follow_endpoint_ = ep;
    auto ch = channel(ep, Lane::kFollow);
    // 1. Everything under the prefix, at one revision: page by page, each
    //    page at the first one's revision (what it read is the store then).
    {
      auto kv = pb::KV::NewStub(ch);
      std::map<std::string, StoreEntry> entries;
      int64_t at = 0;        // the revision read at: the first page's
      uint64_t read_id = 0;  // the etcd cluster that answered (the first page's header)
      std::string from = start;
      grpc::Status s;
      for (;;) {
        grpc::ClientContext ctx;
        prepare_call(ctx, pages.deadline_ns());
        {
          // Registered before stop_ is read: a stop either sees it and
          // cancels the call, or was seen here.
          std::lock_guard<std::mutex> lock(mutex_);
          read_context_ = &ctx;
        }
        if (stop_) {
          std::lock_guard<std::mutex> lock(mutex_);
          read_context_ = nullptr;
          break;
        }
        pb::RangeRequest req;
        req.set_key(from);
        req.set_range_end(end);
        req.set_limit(pages.keys());
        req.set_revision(at);  // 0: the newest
        pb::RangeResponse resp;
        const uint64_t asked_ns = now_ns();
        s = kv->Range(&ctx, req, &resp);
        {
          std::lock_guard<std::mutex> lock(mutex_);
          read_context_ = nullptr;
        }
        if (!s.ok()) {
          if (stop_) break;
          if (pages.keys() == 1 && over_receive_limit(s)) {
            // One key's value is larger than this gateway may receive: no
            // page, however small or long, can bring it. Asked again and
            // again (each time etcd built the whole value to send), it left
            // the gateway "store unreachable" for good, the store answering.
            // Read without its value: a key outside the layout is ignored
            // as ever, a document is refused, naming its size.
            auto k = first_key(ep, from, end, at);
            if (!k) break;  // the member does not answer: the next one
            if (at == 0) {
              at = k->revision;
              read_id = k->cluster_id;
            }
            const uint64_t bytes = received_size(s);
            const bool document = mirror.keeps_value(k->key);
            k->entry.value = document ? unreceived_value(bytes) : std::string();
            spdlog::warn(
                "cluster: {} holds a value of about {} bytes, more than the {} this gateway can receive: read without "
                "it ({}); delete or shrink it (etcdctl del {})",
                k->key, bytes, kStoreReceiveLimitBytes,
                document ? "refused as a document" : "ignored, as is every key outside the layout", k->key);
            entries[k->key] = std::move(k->entry);
            from = k->key + '\0';
            continue;
          }
          if (s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED &&
              s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED)
            break;
          // Late or larger than the receive limit: too much at once for
          // this store or link, or a member that no longer answers. The
          // pages get smaller either way (they grow back once pages arrive
          // in time); a member that answers is asked again at once.
          const int64_t left = keys_left(ep, from, end, at);
          const int64_t asked = pages.keys();
          const uint64_t allowed_ns = pages.deadline_ns();
          const bool smaller = pages.too_large(left > 0 ? left : 0);
          if (left < 0 || !smaller) break;
          spdlog::info(
              "cluster: a page of {} key(s) of the full read from {} did not arrive ({} within {} ms; {} key(s) "
              "still to read): asking for {} key(s) a page, within {} ms",
              asked, endpoints_[ep].target, status_text(s), allowed_ns / kMs, left, pages.keys(),
              pages.deadline_ns() / kMs);
          continue;
        }
        pages.arrived(now_ns() - asked_ns, resp.kvs_size(), resp.ByteSizeLong());
        if (at == 0) {
          at = resp.header().revision();
          read_id = resp.header().cluster_id();
        }
        for (const auto& k : resp.kvs()) {
          // A key outside the layout is kept without its value (StoreMirror::put).
          entries[k.key()] = StoreEntry{mirror.keeps_value(k.key()) ? k.value() : std::string(), k.create_revision(),
                                        k.mod_revision(), k.lease()};
        }
        if (!resp.more() || resp.kvs_size() == 0) break;
        from = resp.kvs(resp.kvs_size() - 1).key() + '\0';  // the next key after the last read
      }
      if (stop_) break;  // a read cut short is no view to publish
      // The start-up answers serve the first read only: later ones ask anew.
      const std::vector<uint64_t> probed = std::exchange(start_ids, {});
      if (!s.ok()) {
        // Compacted past the first page's revision while paging: start
        // over at the newest, on this member (it answers).
        const bool compacted = s.error_code() == grpc::StatusCode::OUT_OF_RANGE;
        if (compacted) {
          full_read_compacted(fmt::format("full read compacted at revision {} while paging", at), status_text(s));
          sleep_backoff(backoff);
          continue;
        }
        set_connected(false, endpoints_[ep].target + ": " + status_text(s));
        drop_channel(ep, Lane::kFollow);
        ep = (ep + 1) % endpoints_.size();
        sleep_backoff(backoff);
        continue;
      }
      bool replaced = false;
      if (!store_followable(ep, read_id, replaced, probed)) {
        std::string why;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          why = foreign_store_;
        }
        set_connected(false, why);
        drop_channel(ep, Lane::kFollow);
        ep = (ep + 1) % endpoints_.size();
        sleep_backoff(backoff);
        continue;
      }
      const int64_t before = mirror.revision();
      mirror.reset(std::move(entries), at, replaced);
      if (mirror.revision() < before) {
        spdlog::warn(
            "cluster: the store's revision went back from {} to {} (restored from a snapshot, or another "
            "cluster at these endpoints?): following it from there",
            before, mirror.revision());
      }
      publish_view(mirror);
      set_connected(true, "");
      std::lock_guard<std::mutex> lock(mutex_);
      ++full_reads_;
    }
    // 2. Every change after that revision.
    auto watch = pb::Watch::NewStub(ch);
    grpc::ClientContext ctx;
    require_leader(ctx);
    auto stream = watch->Watch(&ctx);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      watch_context_ = &ctx;
      last_watch_message_ns_ = now_ns();
    }
    pb::WatchRequest create;
    auto* c = create.mutable_create_request();
    c->set_key(start);
    c->set_range_end(end);
    c->set_start_revision(mirror.revision() + 1);
    c->set_progress_notify(true);
    // A response larger than etcd's --max-request-bytes comes in fragments
    // of at most that: a watch created behind the store's head (writes
    // while the prefix was read) is sent the revisions since in one
    // response of up to 1000 revisions, which over a narrow link took
    // longer than the silence deadline to arrive: the watch was cancelled,
    // the prefix read again, the next watch behind again, for as long as
    // the writes went on, never delivering a change. Fragments arrive.
    c->set_fragment(true);
    bool healthy = stream->Write(create);
    {
      // The session thread asks for progress through this (a Write may run
      // beside this thread's Read; writes are serialised by
      // watch_write_mutex_).
      std::lock_guard<std::mutex> lock(watch_write_mutex_);
      ask_progress_ = [s = stream.get()] {
        pb::WatchRequest r;
        r.mutable_progress_request();
        return s->Write(r);
      };
    }
    pb::WatchResponse resp;
    // The events of the response being received (of all its fragments so
    // far, for a fragmented one: a revision's events are applied together,
    // the whole response is), and the bytes of the values kept (those
    // outside the layout are not).
    std::vector<WatchEvent> pending;
    size_t pending_bytes = 0;
    bool created = false;
    bool current = false;  // the view is current (follow_state_): the watch is created and cannot be compacted away
    while (healthy && !stop_ && stream->Read(&resp)) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        last_watch_message_ns_ = now_ns();
      }
      bool became_current = false;
      if (resp.created()) {
        created = true;
        std::lock_guard<std::mutex> lock(mutex_);
        became_current = current = follow_state_.watch_created(resp.header().revision(), mirror.revision());
      }
      for (const auto& ev : resp.events()) {
        const auto& k = ev.kv();
        const bool keep = mirror.keeps_value(k.key());
        pending_bytes += k.key().size() + (keep ? k.value().size() : 0);
        pending.push_back(
            WatchEvent{ev.type() == mvccpb::Event::PUT, k.key(),
                       StoreEntry{keep ? k.value() : std::string(), k.create_revision(), k.mod_revision(), k.lease()}});
      }
      // One message is at most that (gRPC's receive limit); fragments add up.
      if (pending_bytes > kStoreReceiveLimitBytes) {
        spdlog::warn(
            "cluster: a watch response of more than {} bytes of documents, in fragments: reading "
            "everything again",
            kStoreReceiveLimitBytes);
        break;
      }
      if (resp.fragment()) continue;  // more of this response to come
      WatchMessage m;
      m.created = resp.created();
      m.canceled = resp.canceled();
      m.compact_revision = resp.compact_revision();
      m.revision = resp.header().revision();
      m.requested_progress = resp.watch_id() == -1;
      m.cancel_reason = resp.cancel_reason();
      m.events = std::exchange(pending, {});
      pending_bytes = 0;
      const WatchOutcome outcome = apply_watch_message(mirror, m);
      if (outcome == WatchOutcome::kReadAgain) {
        const std::string what =
            m.compact_revision > 0 ? "compacted at revision " + std::to_string(m.compact_revision) : "cancelled";
        // Compacted before it delivered anything: the read it was to follow
        // was compacted away as surely as one while paging, and a store
        // compacted between every read and its watch would otherwise be
        // read again and again, never followed, with health ok.
        if (m.compact_revision > 0 && !current) {
          full_read_compacted(
              fmt::format("the watch from revision {} {} before it delivered anything", mirror.revision() + 1, what),
              m.cancel_reason.empty() ? "watch " + what : m.cancel_reason);
        } else {
          spdlog::warn("cluster: watch {} ({}): reading everything again", what, m.cancel_reason);
        }
        break;
      }
      if (outcome == WatchOutcome::kChanged) {
        publish_view(mirror);
        std::lock_guard<std::mutex> lock(mutex_);
        events_ += m.events.size();
        if (follow_state_.watch_delivered()) became_current = current = true;
      }
      if (created) set_connected(true, "");
      // Followed from here: the next failure backs off from the start, and
      // reads compacted away before are over.
      if (became_current) {
        backoff = kMinBackoffNs;
        view_followed();
      }
    }
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
    ctx.TryCancel();
    const grpc::Status s = stream->Finish();
    if (stop_) break;
    if (over_receive_limit(s)) {
      // A change larger than this gateway can receive (one value, or
      // etcd's batch of many): the member answers, and a full read reads
      // such a value's key without it. Not "store unreachable".
      spdlog::warn(
          "cluster: the watch's message of about {} bytes is more than the {} this gateway can receive: "
          "reading everything again",
          received_size(s), kStoreReceiveLimitBytes);
      sleep_backoff(backoff);
    } else if (!s.ok() && s.error_code() != grpc::StatusCode::CANCELLED) {
      set_connected(false, endpoints_[ep].target + ": watch: " + status_text(s));
      drop_channel(ep, Lane::kFollow);
      ep = (ep + 1) % endpoints_.size();
      sleep_backoff(backoff);
    } else if (!s.ok()) {
      // Cancelled by the session thread (silent watch) or by the server: this
      // member may be cut off; try the next one.
      drop_channel(ep, Lane::kFollow);
      ep = (ep + 1) % endpoints_.size();
      sleep_backoff(backoff);
    }
  }
}

namespace {

// A small read beside a full read's pages (a count, a key without its
// value): of [from, end) at `revision` (0: the newest), `shape` setting what
// it asks for. On the calls' connection (Lane), not behind what a late
// page left in flight on the follow thread's; under a page's deadline all
// the same: it shares the link with those bytes. nullopt: no answer.
std::optional<pb::RangeResponse> side_read(const std::shared_ptr<grpc::Channel>& ch, const std::string& from,
                                           const std::string& end, int64_t revision,
                                           const std::function<void(pb::RangeRequest&)>& shape) {
  auto kv = pb::KV::NewStub(ch);
  grpc::ClientContext ctx;
  prepare_call(ctx, kReadDeadlineNs);
  pb::RangeRequest req;
  req.set_key(from);
  req.set_range_end(end);
  req.set_revision(revision);
  shape(req);
  pb::RangeResponse resp;
  if (!kv->Range(&ctx, req, &resp).ok()) return std::nullopt;
  return resp;
}

}  // namespace

int64_t EtcdLink::keys_left(size_t ep, const std::string& from, const std::string& end, int64_t revision) {
  auto resp =
      side_read(channel(ep, Lane::kCalls), from, end, revision, [](pb::RangeRequest& r) { r.set_count_only(true); });
  return resp ? resp->count() : -1;
}

std::optional<EtcdLink::KeyOnly> EtcdLink::first_key(size_t ep, const std::string& from, const std::string& end,
                                                     int64_t revision) {
  auto resp = side_read(channel(ep, Lane::kCalls), from, end, revision, [](pb::RangeRequest& r) {
    r.set_limit(1);
    r.set_keys_only(true);
  });
  if (!resp || resp->kvs_size() == 0) return std::nullopt;
  const auto& k = resp->kvs(0);
  return KeyOnly{k.key(), StoreEntry{std::string(), k.create_revision(), k.mod_revision(), k.lease()},
                 resp->header().revision(), resp->header().cluster_id()};
}

}  // namespace psgate
