// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: arbitrary documents in a cluster's etcd prefix. Anyone
// with write access to the store (a scheduler's script, an operator with
// etcdctl) can put anything there, so every gateway parses it: the input is
// lines "K<value>", K picking the key (a job, the order, the policy, a
// progress report, the leader's ranks, a registration, the leader key, a key
// outside the layout). StoreMirror::view() and cluster_ranks() must never
// crash, throw or hang; a document is either applied or named in
// view.problems; every job it applies is one jobs.add would accept.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "psgate/cluster_layout.h"

namespace {

using namespace psgate;

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_cluster_documents: %s: %s\n", what, detail.c_str());
  std::abort();
}

std::string key_for(char k, const ClusterKeys& keys) {
  switch (static_cast<unsigned char>(k) % 10) {
    case 0:
      return keys.job(1 + static_cast<unsigned char>(k) % 7);
    case 1:
      return keys.order();
    case 2:
      return keys.policy();
    case 3:
      return keys.progress(1 + static_cast<unsigned char>(k) % 7);
    case 4:
      return keys.ranks();
    case 5:
      return keys.gateway("gw-" + std::to_string(static_cast<unsigned char>(k) % 3));
    case 6:
      return keys.leader();
    case 7:
      return keys.jobs() + "x";
    case 8:
      return keys.jobs() + "0";
    default:
      return keys.prefix + "/unknown";
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ClusterKeys keys{"/psgate/fuzz"};
  StoreMirror mirror(keys, 8);
  std::string_view in(reinterpret_cast<const char*>(data), size);
  int64_t revision = 0;
  size_t entries = 0;
  while (!in.empty() && entries < 64) {
    const size_t nl = in.find('\n');
    std::string_view line = in.substr(0, nl);
    in = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
    if (line.empty()) continue;
    ++revision;
    if (line.size() == 1 && line[0] == '-') {
      mirror.erase(keys.job(1));
      continue;
    }
    // Under a lease or not by the key's byte: a registration without one is
    // named apart (view.unleased_gateways), one with one is summed.
    const int64_t lease = static_cast<unsigned char>(line[0]) & 0x80 ? 0 : 0x1234;
    mirror.put(key_for(line[0], keys), StoreEntry{std::string(line.substr(1)), revision, revision, lease});
    ++entries;
  }
  mirror.set_revision(revision);
  const ClusterView view = mirror.view();
  size_t jobs_keys = 0;
  for (const auto& [key, e] : mirror.entries())
    if (key.rfind(keys.jobs(), 0) == 0) ++jobs_keys;
  if (view.jobs.size() + view.problems.size() < jobs_keys) fail("a job key neither applied nor reported", "");
  for (const ClusterJob& j : view.jobs) {
    if (j.spec.id == 0 || j.spec.match.empty()) fail("applied an invalid job", std::to_string(j.spec.id));
    if (mirror.entries().count(keys.job(j.spec.id)) == 0) fail("job under another key", std::to_string(j.spec.id));
  }
  for (size_t i = 1; i < view.jobs.size(); ++i)
    if (view.jobs[i - 1].created > view.jobs[i].created) fail("jobs not oldest first", "");
  const auto order = view.full_order();
  if (order.size() != view.jobs.size()) fail("full_order lost or repeated a job", std::to_string(order.size()));
  PolicyState state;
  PolicyParams policy = view.policy.value_or(PolicyParams{});
  const auto ranks = cluster_ranks(view, policy, state, 1'000'000'000);
  if (ranks.size() != view.jobs.size()) fail("cluster_ranks lost a job", std::to_string(ranks.size()));
  for (const auto& [name, g] : view.gateways)
    if (std::find(view.unleased_gateways.begin(), view.unleased_gateways.end(), name) != view.unleased_gateways.end())
      fail("a registration both listed and unleased", name);
  GatewayInfo own;
  describe_policy(own, PolicyParams{});  // static, no parameters
  (void)policy_mismatch_trouble(view, "gw-0", own);
  describe_policy(own, PolicyParams{PolicyKind::kRoundRobin, 1'000'000'000, RotateOn::kTime});
  (void)policy_mismatch_trouble(view, "gw-0", own);
  // A registration's parameters, read back, are ones it could have written.
  for (const auto& [name, g] : view.gateways) {
    if (g.policy_interval_ns.has_value() != g.policy_rotate_on.has_value()) fail("half the policy parameters", name);
    if (auto back = parse_gateway(gateway_json(g).dump()); !back.ok() || !(*back == g))
      fail("a registration does not read back as itself", name);
    (void)policy_label(g);
  }
  return 0;
}
