// SPDX-License-Identifier: BSD-3-Clause
// Cluster mode's data model, as pure logic (no gRPC, no DPDK): the keys under
// the cluster's prefix, their JSON documents, a mirror of the prefix that
// store events update, the cluster's state read from it (ClusterView), the
// writes a control command turns into, and the policy the leader evaluates.
// The etcd client (src/cluster/) moves bytes; everything it means is here,
// so it is unit-tested without a store. The layout is documented in
// docs/cluster.md.
//
// Keys (P = [cluster] prefix); every value is a JSON object with "schema":
//   P/jobs/<id>        a job: jobs.add's arguments (job, name, match, police, police_burst)
//   P/order            the operator's order: {"order": [ids, top first]}
//   P/policy           the policy: the `policy` command's arguments
//   P/progress/<id>    a job's reported progress: the `progress` command's arguments
//   P/ranks            the ranks the policy leader computed (non-static policies)
//   P/gateways/<name>  a gateway's registration (leased): version, health, revision applied, telemetry
//   P/leader           the policy leader (leased): {"name": gateway}
// Jobs and the order carry no lease: losing every gateway loses no job.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "psgate/config.h"
#include "psgate/policy.h"
#include "psgate/result.h"

namespace psgate {

class JobRegistry;

inline constexpr int kClusterSchema = 1;

// The largest job document a gateway reads. One a gateway writes comes from a
// control request of at most 64 KiB (kMaxRequestBytes), its rules rendered
// at most about 1.5 times longer ("src=::1" as "src=::1/128"). A larger one,
// put by hand (etcd takes 1.5 MiB), held every gateway's control thread for
// seconds while its rules built, and a stop waited for it.
inline constexpr size_t kMaxJobDocumentBytes = 256 * 1024;

// The largest message a gateway receives from the store (gRPC's receive
// limit on its channels): a page of a full read, or a watch message.
inline constexpr size_t kStoreReceiveLimitBytes = size_t{256} << 20;

// A value larger than a gateway can receive (kStoreReceiveLimitBytes: etcd
// takes one that large where --max-request-bytes is raised) can
// never arrive in a read, whatever the page or its deadline: a full read
// keeps that key without it, as this text (`bytes`: its size, about), which
// every document parser refuses with that size as the reason.
std::string unreceived_value(uint64_t bytes);

// The keys, each from the prefix.
struct ClusterKeys {
  std::string prefix;  // no trailing '/'
  std::string all() const { return prefix + "/"; }
  std::string jobs() const { return prefix + "/jobs/"; }
  std::string job(uint32_t id) const { return jobs() + std::to_string(id); }
  std::string order() const { return prefix + "/order"; }
  std::string policy() const { return prefix + "/policy"; }
  std::string progresses() const { return prefix + "/progress/"; }
  std::string progress(uint32_t id) const { return progresses() + std::to_string(id); }
  std::string ranks() const { return prefix + "/ranks"; }
  std::string gateways() const { return prefix + "/gateways/"; }
  std::string gateway(const std::string& name) const { return gateways() + name; }
  std::string leader() const { return prefix + "/leader"; }
};

// The end of an etcd range covering every key that starts with `prefix`.
std::string prefix_range_end(std::string_view prefix);

// One key as the store holds it.
struct StoreEntry {
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

// A job's per-gateway measurements that a policy ranks on (policy.h's
// PolicyJob minus what the job reports itself).
struct JobMeasure {
  uint64_t iterations_seen = 0;
  uint64_t bytes_per_iteration = 0;
  uint64_t bytes_this_iteration = 0;
  bool operator==(const JobMeasure&) const = default;
};

// A gateway's registration document.
struct GatewayInfo {
  std::string name;
  std::string version;
  std::string address;
  std::string health;  // "ok" or "degraded"
  int64_t applied_revision = 0;
  std::optional<double> degraded_since_s;  // unix time; set while the store is unreachable from it
  std::string top_job;                     // the id of its top job ("" with none): are the hosts in agreement?
  // The policy it runs (policy_name: the store's P/policy, or its own
  // [policy] where the store has none); "" from a gateway that does not say
  // (an older version). Without P/policy, gateways of mixed [policy] rank
  // differently: policy_mismatch_trouble.
  std::string policy;
  // Round-robin's parameters, which decide when the order rotates: its
  // interval and rotate_on, both set or neither (`"policy_params"`). None
  // for the other policies (their interval is only how often the leader
  // evaluates), nor from an older psgate, which is compared by name only.
  std::optional<uint64_t> policy_interval_ns;
  std::optional<RotateOn> policy_rotate_on;
  uint64_t rx_packets = 0, tx_packets = 0, dropped = 0;
  std::map<uint32_t, JobMeasure> jobs;
  bool operator==(const GatewayInfo&) const = default;
};
nlohmann::json gateway_json(const GatewayInfo& g);
Result<GatewayInfo> parse_gateway(std::string_view text);
// A registration's policy fields for a gateway that runs `p`.
void describe_policy(GatewayInfo& g, const PolicyParams& p);
// A registration's policy as health and psgatectl cluster name it: the
// name, with round-robin's parameters where the registration carries them:
// "static", "round-robin(500ms)", "round-robin(iteration,20s)".
std::string policy_label(const GatewayInfo& g);
// The same from a registration's texts (psgatectl cluster has the JSON):
// `interval` as policy_params says it ("": no parameters), `rotate_on`
// "time" or "iteration".
std::string policy_label(const std::string& policy, const std::string& interval, const std::string& rotate_on);

// The cluster's state as the store says it, at one revision.
struct ClusterJob {
  JobSpec spec;         // rank unused: the order decides
  int64_t created = 0;  // the key's create revision: the jobs' age, so rule precedence is the same on every gateway
};
struct ClusterView {
  int64_t revision = 0;
  // Bumped each time a full read finds the store's revision below the one
  // before it: the store was replaced (restored from a snapshot, or a new
  // cluster at the same endpoints) and its revisions start over. A view of
  // another epoch is newer whatever its revision (view_is_newer).
  uint64_t store_epoch = 0;
  std::vector<ClusterJob> jobs;        // oldest first; one revision's (jobs.load) by id
  std::vector<uint32_t> order;         // as stored: top first; jobs it leaves out follow, oldest first
  int64_t order_revision = 0;          // the order key's mod revision (0: absent), to fence a rewrite on
  std::optional<PolicyParams> policy;  // none: the gateway's configured policy
  std::map<uint32_t, JobProgress> progress;
  std::optional<std::vector<JobRanks>> ranks;   // the leader's, for a non-static policy
  std::string ranks_policy;                     // the policy those ranks were computed for
  uint64_t ranks_rotation = 0;                  // round-robin's rotation count, for a new leader to go on from
  std::map<std::string, GatewayInfo> gateways;  // registered under a lease
  // Registrations without a lease (put by hand: a gateway registers under
  // its lease, so that its entry goes when it does): such a key never
  // expires, so it is not listed among the gateways, nor its telemetry
  // summed; its name is, here (and among the problems, logged once).
  std::vector<std::string> unleased_gateways;
  std::string leader;                 // "" with none, or a leader document this gateway cannot read
  int64_t leader_created = 0;         // the leader key's create revision (the leadership's fence; 0: no key)
  int64_t leader_lease = 0;           // the leader key's lease
  std::vector<std::string> problems;  // keys whose documents were refused (ignored, reported)
  // Of those, job documents that never parsed (none in force for the id), by
  // id: such a key blocks `jobs add` of the id, and `jobs rm` deletes it
  // (refused_job_removal), fenced on the revision it was seen at.
  struct RefusedJob {
    std::string why;
    int64_t mod_revision = 0;
  };
  std::map<uint32_t, RefusedJob> refused_jobs;
  // Of those, the layout's documents refused where a good one was in force,
  // which stays (fail static): this gateway does not follow what the store
  // now holds for them (health degraded).
  std::vector<std::string> held;
  std::set<std::string> held_keys;  // their keys
  // The order, policy and ranks documents refused, held or not: why, by key.
  // Held or not is each gateway's own (a gateway started after the bad
  // write has nothing to hold and reads the key as absent), so this, not
  // `held`, is what every gateway sees alike.
  std::map<std::string, std::string> refused_documents;
  // Changes when what a gateway applies changes (jobs, order, policy,
  // progress, ranks), not on registrations: the newest modification among
  // those keys and how many there are (so a deletion counts too).
  std::pair<int64_t, size_t> applied_part{0, 0};
  // The same over the job keys alone: what a failed apply (a classifier
  // that cannot be built) depends on, where ranks and progress move every
  // evaluation under a policy (ControlPlane's apply backoff).
  std::pair<int64_t, size_t> jobs_part{0, 0};

  // Every job id, top first: the order's, then the rest oldest first.
  std::vector<uint32_t> full_order() const;
};

// Why the gateways may not all follow what the store holds, "" if nothing
// says so: a refused job document (held here or never parsed), or a refused
// order, policy or ranks document. Every gateway reads these alike, and each
// says so (health's trouble, naming them): a gateway that held the last good
// document and one started after the bad write (which reads the key as
// absent, or never had the job) would otherwise apply different states,
// each saying "ok".
std::string refused_documents_trouble(const ClusterView& v, const ClusterKeys& keys);

// Why the gateways may rank by different policies, "" if they do not: the
// store has no P/policy, so each runs its own [policy], and the
// registrations (this gateway's taken as `own_policy` under `own_name`,
// whatever its registration in `v` says) name more than one. The same
// words on every gateway (policies in name order, each with up to 3 of its
// gateways), so that every one says `degraded` alike, the static leader
// too, which writes no ranks for the others to see the difference by.
// Gateways that run one policy with different parameters that change the
// order (round-robin's interval or rotate_on) differ as much as two
// policies do, and are said in the same words, the labels (policy_label)
// naming them; a registration without parameters (an older psgate) differs
// only by name. `own`: this gateway's policy fields (describe_policy).
std::string policy_mismatch_trouble(const ClusterView& v, const std::string& own_name, const GatewayInfo& own);

// Whether `v` is to be applied by a gateway that applied `revision` of
// store epoch `epoch`: a later revision, or a store that started over.
inline bool view_is_newer(const ClusterView& v, uint64_t epoch, int64_t revision) {
  return v.store_epoch != epoch || v.revision > revision;
}

// The prefix's keys as last read or watched.
class StoreMirror {
 public:
  StoreMirror(ClusterKeys keys, unsigned class_count) : keys_(std::move(keys)), class_count_(class_count) {}
  // A full read at `revision`: replaces everything (what vanished is gone).
  // `replaced`: the read came from a store known to be another than the
  // last one read (its etcd cluster id changed at every endpoint), a new
  // epoch even where its revision is past the old store's.
  void reset(std::map<std::string, StoreEntry> entries, int64_t revision, bool replaced = false);
  void put(const std::string& key, StoreEntry entry);
  // Whether `key` is one of the layout's, whose value is kept; another is
  // only named as ignored, its value (however large) dropped.
  bool keeps_value(const std::string& key) const;
  void erase(const std::string& key);
  void set_revision(int64_t revision) { revision_ = revision; }
  int64_t revision() const { return revision_; }
  uint64_t epoch() const { return epoch_; }
  const std::map<std::string, StoreEntry>& entries() const { return entries_; }
  // Every document parsed; one that does not parse is left out and named in
  // view.problems (so a bad write by a script cannot stop the cluster), and
  // where it replaced a good one, that one stays (view.held). Job
  // documents are parsed once, when they arrive: a registration's heartbeat
  // does not parse 100k rules again.
  ClusterView view() const;

 private:
  struct ParsedJob {
    std::optional<ClusterJob> job;
    std::string problem;
  };
  ParsedJob parse_job(const std::string& key, const StoreEntry& e) const;
  // Registrations are parsed once too: each gateway rewrites its own every
  // second, and a view must not parse every other one again each time.
  struct ParsedGateway {
    std::optional<GatewayInfo> gateway;
    std::string problem;
  };
  ParsedGateway parse_gateway_entry(const std::string& key, const StoreEntry& e) const;
  // Why `text` is no document for `key` (order, policy, ranks, progress),
  // or none; any other key: none.
  std::optional<std::string> applied_document_problem(const std::string& key, std::string_view text) const;

  ClusterKeys keys_;
  unsigned class_count_;
  std::map<std::string, StoreEntry> entries_;
  std::map<std::string, ParsedJob> jobs_;          // by key: every P/jobs/... entry, parsed
  std::map<std::string, ParsedGateway> gateways_;  // by key: every P/gateways/... entry, parsed
  std::map<std::string, std::string> held_;        // by key: why its newer document was refused (put)
  int64_t revision_ = 0;
  uint64_t epoch_ = 0;
};

// One message of a watch on the prefix, as etcd's WatchResponse carries it
// (the gRPC client translates; the decision is made here, unit-tested).
struct WatchEvent {
  bool put = true;  // false: a delete
  std::string key;
  StoreEntry entry;  // for a put; a delete's carries its revision in mod_revision, as etcd's do
};
struct WatchMessage {
  bool created = false;
  bool canceled = false;
  int64_t compact_revision = 0;  // > 0: the watch's start revision was compacted away
  int64_t revision = 0;          // the store's revision when etcd sent it (header)
  // The reply to a progress request (watch id -1). etcd 3.4.23 sends it at
  // once with the store's revision, even to a watch whose events up to
  // there are still queued (etcd #15220, fixed in 3.4.24): its revision
  // says nothing of what this watch has been sent.
  bool requested_progress = false;
  std::string cancel_reason;
  std::vector<WatchEvent> events;
};
enum class WatchOutcome {
  kNothing,    // a progress report or the creation: nothing new to apply
  kChanged,    // events applied, or the revision moved on: hand out a new view
  kReadAgain,  // cancelled or compacted: never skip ahead; read the whole prefix again
};
// Applies one message to the mirror. A cancelled or compacted watch leaves
// the mirror untouched: what it missed can only be known by a full read
// (StoreMirror::reset, which also drops what vanished meanwhile).
WatchOutcome apply_watch_message(StoreMirror& mirror, const WatchMessage& message);

// Documents, each as its command's arguments plus "schema".
std::string job_document(const JobSpec& job);
std::string order_document(const std::vector<uint32_t>& order);
std::string policy_document(const PolicyParams& policy);
std::string progress_document(const JobProgress& progress);
std::string ranks_document(const std::vector<JobRanks>& ranks, const std::string& policy, uint64_t rotation,
                           const std::string& leader);
std::string leader_document(const std::string& name);

// What one control command asks of the store: puts (value by key), deletes,
// keys that must not exist yet (a new job), and keys whose modification
// revision must still be the one this gateway has seen (the order: two
// gateways re-ranking at once cannot silently undo one another).
struct StoreWrite {
  std::vector<std::pair<std::string, std::string>> puts;
  std::vector<std::string> deletes;
  std::vector<std::string> absent;
  std::vector<std::pair<std::string, int64_t>> unchanged_since;  // key, mod revision (0: absent)
  bool empty() const { return puts.empty() && deletes.empty(); }
};
// The store writes that remove job `id` whose document never parsed
// (seen.refused_jobs): this gateway does not hold it, so no registry change
// names it.
// As a removal does: its key (fenced on the revision seen: a good document
// written meanwhile is not deleted unseen), its progress, and its place in
// the stored order (fenced on the order seen), so that the id added again
// takes no old place or progress.
StoreWrite refused_job_removal(const ClusterKeys& keys, const ClusterView& seen, uint32_t id);
// Adds `extra`'s writes to `w`.
void append_store_write(StoreWrite& w, const StoreWrite& extra);

// The store writes that take the cluster from `before` to `after` (the
// registry and policy a control command's handler proposed).
// `policy_named`: the command named the policy (psgatectl policy NAME), which
// is written wherever the store does not hold it, even when this gateway
// runs it already (its own [policy], the store having none): what every
// gateway runs is then P/policy, as the command's reply and health's remedy
// say, not each gateway's [policy].
StoreWrite store_write(const ClusterKeys& keys, const ClusterView& seen, const JobRegistry& before,
                       const PolicyParams& policy_before, const JobRegistry& after, const PolicyParams& policy_after,
                       bool policy_named = false);

// The policy over the whole cluster (the leader's work): the jobs in the
// cluster's order, their reported progress, and each job's measurements
// combined over every gateway (iterations: the most any gateway saw; bytes:
// the sum, as a job sharded over hosts sends that much in all).
std::vector<JobRanks> cluster_ranks(const ClusterView& view, const PolicyParams& policy, PolicyState& state,
                                    uint64_t now_ns);

// What a full read answered by etcd cluster `read_id` (the response
// header's cluster_id) means to a gateway that followed `followed_id` (0:
// none yet), given the cluster id each configured endpoint answered a probe
// with (0: it did not answer), and which endpoints ever answered for the
// cluster followed (`served_followed`, by endpoint). Endpoints of two
// clusters (a config that names members of another cluster, a DR copy) must
// not be switched between on a failover, nor picked from at the start by
// whichever answers first: the other cluster's jobs and order would be
// applied silently. So the first read is followed only where no endpoint
// answers for another cluster. A store replaced at the same endpoints
// (restored from a snapshot, wiped and started again) has a new cluster id
// too; it is followed where no endpoint answers for another cluster and
// either every endpoint answers for it, or most of them (more than half) do,
// one of which answered for the cluster followed before: a restored cluster
// may lack a member the config still names.
enum class StoreIdentity {
  kSame,      // the cluster followed (or the first one read, no endpoint saying otherwise)
  kReplaced,  // another, at the endpoints of the one followed: follow it
  kForeign,   // endpoints answer for different clusters, or the new one is not at the followed one's: not followed
};
StoreIdentity store_identity(uint64_t followed_id, uint64_t read_id, const std::vector<uint64_t>& endpoint_ids,
                             const std::vector<bool>& served_followed = {});

// The watch's silence check (etcd_session.cc) across a time this process did
// not run. The session thread ends each round in a sleep of `planned` ns;
// one that lasted longer by more than `stall` ns means the process was
// frozen or starved of CPU, and that time is not the watch's silence (or
// every stall would cost a reconnect and a full read): the watch's
// last-heard time moves forward by the overshoot, never past `now`. Only the
// sleep is measured: the calls' own time and the backoff are waits on the
// store, and counting them would postpone the check for as long as the
// store misbehaves.
inline uint64_t watch_heard_after_sleep(uint64_t last_heard, uint64_t slept, uint64_t planned, uint64_t stall,
                                        uint64_t now) {
  if (slept <= planned + stall) return last_heard;
  return std::min(now, last_heard + (slept - planned));
}

}  // namespace psgate
