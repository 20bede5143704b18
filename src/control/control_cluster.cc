// SPDX-License-Identifier: BSD-3-Clause
// Cluster mode's operations (docs/cluster.md; control thread only, see
// control_plane.h): the store's view applied, changes forwarded to the
// store, this gateway's report to it, and what health and `psgatectl
// cluster` say of it.
#include "psgate/control_plane.h"

#include <unistd.h>

#include <algorithm>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "psgate/cluster_layout.h"
#include "psgate/text.h"

namespace psgate {

using json = nlohmann::json;

namespace {

bool same_job(const JobSpec& a, const JobSpec& b) {
  return a.id == b.id && a.name == b.name && a.match == b.match && a.police == b.police;
}

}  // namespace

bool ControlPlane::follow_step(uint64_t now_ns) {
  // Slots freed first: a view's new job may want one (every caller comes
  // here: the tick, a wake, a write waiting for its revision).
  release_drained_slots();
  // Jobs a slot still draining kept out (a removed job's packets queued,
  // max_jobs reached) are a wait, not a refusal: the same view again.
  // At most once a control tick: a slot drains at the pace of its queue.
  // A newer view that changes nothing to apply (a registration's heartbeat)
  // does not put the retry off.
  const bool again = refused_while_draining_ && cluster_view_ != nullptr && now_ns >= reapply_ns_;
  auto view = cluster_->newer_than(applied_epoch_, applied_revision_);
  const bool newer = view != nullptr;
  if (!newer && again) view = cluster_view_;
  if (again) reapply_ns_ = now_ns + 100'000'000;
  if (!view) return false;
  const ViewContent content{view->store_epoch, view->jobs_part};
  cluster_view_ = view;
  // A registration's heartbeat moves the revision but changes nothing to apply.
  // A store that started over is applied whole: its revisions (and so
  // applied_part) say nothing against the old store's.
  if (again || view->store_epoch != applied_epoch_ || view->applied_part != applied_part_) {
    if (!apply_retry_.may_try(content, now_ns)) return false;  // these jobs failed: backing off
    if (auto ok = apply_view(*view, now_ns); !ok) {
      ++cluster_apply_errors_;
      cluster_apply_error_ = ok.error();
      // The previous order stays; the same jobs are tried again later,
      // other jobs sooner (RetryBackoff).
      const uint64_t wait_ns = apply_retry_.failed(content, now_ns);
      spdlog::error(
          "cluster: revision {} not applied, the previous order stays (tried again in {} s, or at the "
          "store's next change): {}",
          view->revision, wait_ns / 1'000'000'000, ok.error());
      return false;
    }
    apply_retry_.succeeded();
    applied_part_ = view->applied_part;
  }
  applied_revision_ = view->revision;
  applied_epoch_ = view->store_epoch;
  // The same view applied again brought nothing newer: a caller waiting for
  // a revision (forward_to_cluster) sleeps rather than spinning on it.
  return newer;
}

// The store's jobs, order, policy and progress as a candidate state, through
// commit() like every change: compiled, persisted, published, or refused as a
// whole. Jobs keep their slots; a re-rank only changes ranks (loss-free).
Result<bool> ControlPlane::apply_view(const ClusterView& view, uint64_t now_ns) {
  const size_t jobs_before = state_.jobs.size();
  ControlState next = state_;
  std::unordered_map<uint32_t, const ClusterJob*> wanted;
  for (const ClusterJob& j : view.jobs) wanted[j.spec.id] = &j;
  for (const JobRecord* j : state_.jobs.in_age_order()) {
    auto it = wanted.find(j->spec.id);
    if (it == wanted.end() || !same_job(j->spec, it->second->spec)) (void)next.jobs.remove(j->spec.id);
  }
  // Summed up (text.h): a store with thousands of jobs more than max_jobs
  // would otherwise make health and every log line one reason per job.
  ReasonList refused_jobs("job(s)"), waiting_jobs("job(s)");  // waiting: refused for a slot that is draining
  for (const ClusterJob& j : view.jobs) {
    if (next.jobs.find(j.spec.id)) continue;
    JobRecord record;
    record.spec = j.spec;
    bool no_slot = false;
    if (auto added = next.jobs.add(std::move(record), std::nullopt, &no_slot); !added)
      (no_slot && next.jobs.draining_count() != 0 ? waiting_jobs : refused_jobs).add(added.error());
  }
  const std::string refused = refused_jobs.str(), waiting = waiting_jobs.str();
  std::vector<uint32_t> order;
  for (uint32_t id : view.full_order())
    if (next.jobs.find(id)) order.push_back(id);
  if (auto ok = next.jobs.set_order(order); !ok) return ok;
  for (const auto& [id, progress] : view.progress)
    if (next.jobs.find(id)) (void)next.jobs.set_progress(id, progress);
  next.policy = view.policy.value_or(config_.policy);
  next.cluster_ranks.reset();
  if (next.policy.kind != PolicyKind::kStatic && view.ranks && view.ranks_policy == policy_name(next.policy.kind)) {
    next.cluster_ranks.emplace();
    for (const JobRanks& r : *view.ranks) (*next.cluster_ranks)[r.id] = r;
  } else if (next.policy.kind == PolicyKind::kStatic) {
    // The store's order, positions counted over every job in it: a job
    // another gateway could not take here (max_jobs, a slot still draining)
    // must not move the jobs below it up a class on this one, or a job's
    // class (its caps, floors, ECN, DSCP) would differ between gateways.
    next.cluster_ranks.emplace();
    uint32_t position = 0;
    for (uint32_t id : view.full_order()) {
      if (next.jobs.find(id)) (*next.cluster_ranks)[id] = JobRanks{id, position, position};
      ++position;
    }
  }
  if (auto ok = commit(std::move(next), now_ns, IfUnsaved::kPublishWhatTheStoreHolds); !ok) return ok;
  note_store_emptied(view, jobs_before);
  // Jobs this gateway could not take (no free slot): the rest is in force.
  // Those that wait for a removed job's slot to drain are taken at a later
  // step (follow_step applies this view again meanwhile).
  const bool was_waiting = refused_while_draining_;
  refused_while_draining_ = !waiting.empty();
  if (refused_while_draining_ && !was_waiting)
    spdlog::warn("cluster: revision {}: jobs wait for a removed job's slot to drain: {}", view.revision, waiting);
  cluster_apply_error_ = refused.empty() ? waiting : waiting.empty() ? refused : refused + "; " + waiting;
  if (!refused.empty()) {
    ++cluster_apply_errors_;
    spdlog::error("cluster: revision {}: jobs not applied here: {}", view.revision, refused);
  }
  return true;
}

// A store with no job, order or policy key is followed: it is the
// authority, and a gateway started after it went empty has nothing to
// keep, so keeping jobs here would make the hosts disagree. But a gateway
// that had jobs and drops them all because the prefix went empty (wiped by
// hand or by a script, a store started anew) says so, rather than "ok":
// `psgatectl jobs rm` of the last jobs leaves P/order (store_write), so an
// operator's removal never looks like this. Over once the store holds such
// a key again: not a ranks or progress key, which a leader of a ranking
// policy writes on its own within a second of the wipe (its empty ranks).
void ControlPlane::note_store_emptied(const ClusterView& view, size_t jobs_before) {
  if (!view.jobs.empty() || view.order_revision != 0 || view.policy) {
    if (!store_emptied_.empty())
      spdlog::info("cluster: the store holds jobs, an order or a policy again (revision {})", view.revision);
    store_emptied_.clear();
    return;
  }
  if (jobs_before == 0 || !store_emptied_.empty()) return;
  store_emptied_ = fmt::format(
      "the store went empty at revision {} (no job, order or policy under {}/): the {} job(s) this gateway had "
      "were removed; if that was meant, write a job, an order or a policy (psgatectl policy NAME), else put the "
      "jobs back (psgatectl jobs load FILE)",
      view.revision, cluster_keys_->prefix, jobs_before);
  spdlog::error("cluster: {}", store_emptied_);
}

Result<StoreWrite> ControlPlane::store_write_of(const Candidate& change) const {
  if (!cluster_->connected())
    return Result<StoreWrite>::failure(
        "the cluster store is unreachable: nothing written; this gateway keeps forwarding on the last order "
        "it applied (see psgatectl health)");
  static const ClusterView kNothingSeen;
  const ClusterView& seen = cluster_view_ ? *cluster_view_ : kNothingSeen;
  StoreWrite w = store_write(*cluster_keys_, seen, state_.jobs, state_.policy, change.next.jobs, change.next.policy,
                             change.names_policy);
  append_store_write(w, change.store_extra);
  return w;
}

// The change comes back through the watch like everyone else's; the reply
// waits for it (bounded) so that it shows the change in force here. A
// revision not above the one applied when the write was sent is a store
// that started over (restored from a snapshot) that this gateway had not
// followed yet: in force only once it has (a new store epoch) and reached
// that revision. (Within one store a write's revision is above every one
// applied before it was sent.)
bool ControlPlane::in_force(const WriteStart& at, int64_t revision) const {
  const bool store_went_back = revision <= at.applied_revision;
  return applied_revision_ >= revision && !(store_went_back && applied_epoch_ == at.applied_epoch);
}

json ControlPlane::written_reply(Candidate& change, int64_t revision, bool in_force) {
  if (!in_force) {
    return json{{"store_revision", revision},
                {"applied_here", false},
                {"note", "written to the cluster store; not yet applied on this gateway (see psgatectl cluster)"}};
  }
  json reply = change.reply(*this);
  if (reply.is_object()) reply["store_revision"] = revision;
  return reply;
}

Result<json> ControlPlane::forward_to_cluster(Candidate& change) {
  auto w = store_write_of(change);
  if (!w) return Result<json>::failure(w.error());
  if (w->empty()) return change.reply(*this);
  const WriteStart at = write_start();
  auto revision = cluster_->write(*w);
  if (!revision) return Result<json>::failure(revision.error());
  const uint64_t until = monotonic_ns() + kWrittenReplyWaitNs;
  while (!in_force(at, *revision) && monotonic_ns() < until) {
    if (!follow_step(monotonic_ns())) ::usleep(1000);
  }
  return written_reply(change, *revision, in_force(at, *revision));
}

void ControlPlane::report_to_cluster(uint64_t now_ns) {
  if (now_ns - reported_ns_ < 500'000'000) return;
  reported_ns_ = now_ns;
  GatewayInfo info;
  info.health = cluster_trouble().empty() && state_file_error().empty() ? "ok" : "degraded";
  info.applied_revision = applied_revision_;
  describe_policy(info, state_.policy);
  const Totals totals = dataplane_.read_totals(false);
  info.rx_packets = totals.rx_total();
  info.tx_packets = totals.tx_total();
  info.dropped = totals.drop_total();
  uint32_t top_rank = UINT32_MAX;
  for (const JobRecord* j : state_.jobs.in_rank_order()) {
    const JobTelemetry t = own_telemetry(*j);
    info.jobs[j->spec.id] = JobMeasure{t.bursts, t.last_burst_bytes, t.current_burst_bytes};
    auto r = applied_ranks_.find(j->spec.id);
    if (r != applied_ranks_.end() && r->second.pull_rank < top_rank) {
      top_rank = r->second.pull_rank;
      info.top_job = std::to_string(j->spec.id);
    }
  }
  cluster_->report(info);
}

std::string ControlPlane::cluster_trouble() const { return cluster_trouble(cluster_->status()); }

std::string ControlPlane::cluster_trouble(const json& store_status) const {
  // One of the link's status texts ("" where absent or not a text).
  const auto said = [&store_status](const char* key) {
    const auto it = store_status.find(key);
    return it != store_status.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  // An endpoint of another etcd cluster: not unreachable, and not followed.
  if (std::string why = said("foreign_store"); !why.empty()) return "store not followed: " + why;
  // The same status's word, not connected() asked again: the two could
  // disagree (the store lost in between).
  const auto connected = store_status.find("connected");
  if (connected == store_status.end() || *connected != true) return "store unreachable";
  // The store answers, but the prefix cannot be read whole (compacted away
  // under every read): this gateway follows nothing new.
  if (std::string why = said("full_read_error"); !why.empty()) return "store not followed: " + why;
  if (!cluster_apply_error_.empty()) return "store's view not applied: " + cluster_apply_error_;
  if (!store_emptied_.empty()) return store_emptied_;
  // Before what is held: the same words on every gateway, whether it held
  // a good document or started after the bad one was written.
  if (cluster_view_) {
    if (std::string refused = refused_documents_trouble(*cluster_view_, *cluster_keys_); !refused.empty())
      return refused;
  }
  if (cluster_view_ && !cluster_view_->held.empty())
    return std::to_string(cluster_view_->held.size()) + " store document(s) refused, the last good kept";
  // No P/policy: each gateway runs its own [policy], and the leader ranks by
  // its own. A gateway configured with another ignores those ranks and
  // ranks by itself: the hosts disagree on the top job, each saying ok.
  if (cluster_view_ && !cluster_view_->policy && cluster_view_->ranks &&
      cluster_view_->ranks_policy != policy_name(state_.policy.kind))
    return "the policy leader ranks by \"" + cluster_view_->ranks_policy + "\", this gateway's [policy] is \"" +
           policy_name(state_.policy.kind) +
           "\" and the store has no policy for all: set one (psgatectl policy NAME) so that every gateway runs the "
           "same";
  // The same with a static leader, which writes no ranks: each gateway's
  // registration names the policy it runs, and round-robin's parameters
  // (gateways at different intervals rotate as whichever leads says).
  if (cluster_view_) {
    GatewayInfo own;
    describe_policy(own, state_.policy);
    if (std::string mixed = policy_mismatch_trouble(*cluster_view_, said("name"), own); !mixed.empty()) return mixed;
  }
  for (const char* key : {"registration_error", "session_error"})
    if (std::string why = said(key); !why.empty()) return "not registered: " + why;
  // Last: an endpoint this gateway does not use answers for another etcd
  // cluster (the link's probe). The store is followed as before, so any
  // other trouble above is the one to say.
  if (std::string why = said("foreign_endpoint"); !why.empty())
    return "another etcd cluster among the endpoints: " + why;
  return "";
}

json ControlPlane::cluster_status() const {
  json s = cluster_->status();
  s["trouble"] = cluster_trouble(s);
  // At most 100, as jobs_refused: a store full of bad progress documents
  // must not make health megabytes (trouble says how many there are).
  json held = json::array();
  if (cluster_view_) {
    for (const std::string& key : cluster_view_->held) {
      if (held.size() == 100) break;
      held.push_back(key);
    }
  }
  s["documents_held"] = std::move(held);
  json refused = json::array();
  if (cluster_view_) {
    for (const auto& [id, job] : cluster_view_->refused_jobs) {
      if (refused.size() == 100) break;  // a store full of them must not make health megabytes
      refused.push_back(json{{"job", id}, {"key", cluster_keys_->job(id)}, {"why", job.why}});
    }
  }
  s["jobs_refused"] = std::move(refused);
  s["applied_revision"] = applied_revision_;
  s["apply_errors"] = cluster_apply_errors_;
  s["last_apply_error"] = cluster_apply_error_;
  s["state_file_error"] = state_file_error();
  return s;
}

Result<ControlPlane::Outcome> ControlPlane::apply(const ClusterRequest&) const {
  if (!cluster_) return Outcome{json{{"mode", "single-host"}}};
  json out = cluster_status();
  out["mode"] = "cluster";
  json gateways = json::array();
  if (cluster_view_) {
    for (const auto& [name, g] : cluster_view_->gateways) {
      json row = gateway_json(g);
      row.erase("schema");
      row.erase("jobs");
      row["lag"] = std::max<int64_t>(0, cluster_view_->revision - g.applied_revision);
      gateways.push_back(std::move(row));
    }
  }
  out["gateways"] = std::move(gateways);
  json unleased = json::array();
  if (cluster_view_) {
    for (const std::string& name : cluster_view_->unleased_gateways) {
      if (unleased.size() == 100) break;  // as jobs_refused: the reply stays small
      unleased.push_back(name);
    }
  }
  out["unleased_registrations"] = std::move(unleased);
  return Outcome{std::move(out)};
}

}  // namespace psgate
