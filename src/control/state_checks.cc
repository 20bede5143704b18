// SPDX-License-Identifier: BSD-3-Clause
// A saved state against the configuration: the loader's checks, what the
// config file changed since the state was written, and [[jobs]] unlike the
// state's (state_file.h).
#include "control/state_file.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "psgate/units.h"  // bits_per_sec

namespace psgate {

Result<bool> check_saved_state(const SavedState& s, const ConfigSpec& config) {
  auto refuse = [&](const std::string& what, const ValueProblem& p) {
    return Result<bool>::failure("state file " + config.control.state + ": " + what + ": \"" + p.key +
                                 "\": " + p.problem + " (nothing was loaded)");
  };
  if (s.live) {
    for (unsigned p = 0; p < kPortCount; ++p) {
      const PortLive& live = (*s.live)[p];
      if (live.shaper_bytes_per_sec)
        if (auto problem = check_shaper(RateSpec{bits_per_sec(live.shaper_bytes_per_sec), live.shaper_burst_bytes}))
          return refuse(std::string("shaper on ") + kPortNames[p], *problem);
      for (size_t c = 0; c < live.classes.size() && c < config.classes.size(); ++c)
        if (auto problem = check_class(class_spec(live.classes[c], config.classes[c].depth)))
          return refuse("class " + std::to_string(c) + " on " + kPortNames[p], *problem);
      if (auto problem = floors_problem(live))
        return refuse(std::string("port ") + kPortNames[p], ValueProblem{"floor", *problem});
    }
  }
  for (const JobRecord* j : s.jobs.in_rank_order())
    if (auto problem = check_job(j->spec)) return refuse("job " + std::to_string(j->spec.id), *problem);
  return true;
}

std::vector<std::string> take_file_changes(SavedState& saved, const FileSettings& now, const ConfigSpec& config) {
  std::vector<std::string> taken;
  if (!saved.live || !saved.file) return taken;
  taken = apply_file_changes(*saved.live, saved.policy, *saved.file, now, !config.cluster.has_value());
  // The merge above already lists a class the file changed; what is taken
  // below replaces that entry, so the start-up log names each key once.
  const auto note = [&taken](const std::string& key, const std::string& why) {
    const auto merged = std::find(taken.begin(), taken.end(), key);
    if (merged != taken.end()) taken.erase(merged);
    taken.push_back(key + why);
  };
  for (unsigned p = 0; p < kPortCount; ++p) {
    PortLive& port = (*saved.live)[p];
    const PortLive& file = now.ports[p];
    const PortLive& was = saved.file->ports[p];  // the file's, when the state was written
    const size_t n = std::min({port.classes.size(), file.classes.size(), config.classes.size()});
    bool took_class = false;
    for (size_t c = 0; c < n; ++c) {
      const unsigned depth = config.classes[c].depth;
      if (port.classes[c] == file.classes[c] || !check_class(class_spec(port.classes[c], depth))) continue;
      const std::string key = "classes." + std::to_string(c) + "." + kPortNames[p];
      // Only where the file is why it fails. It changed this class since
      // the state was written (a new cap below a saved floor): the class is
      // the file's. Or only the ECN threshold fails, which a new depth does
      // (the file's record has no depth): only the threshold is the file's,
      // the acknowledged cap, floor and DSCP stay. A saved class wrong by
      // itself otherwise (a hand edit) is left to check_saved_state, which
      // refuses the start naming it: taking the file's would silently drop
      // the acknowledged settings beside the bad one.
      ClassLive without_ecn = port.classes[c];
      without_ecn.actions.ecn_threshold = 0;
      const bool file_changed = c >= was.classes.size() || !(was.classes[c] == file.classes[c]);
      if (!file_changed && !check_class(class_spec(without_ecn, depth))) {
        port.classes[c].actions.ecn_threshold = file.classes[c].actions.ecn_threshold;
        note(key, ".ecn_threshold (the saved one does not fit the class's depth)");
        took_class = true;
        continue;
      }
      if (!file_changed) continue;
      port.classes[c] = file.classes[c];
      took_class = true;
      note(key, " (the whole class: the saved settings did not fit with the file's)");
    }
    // Likewise a port's floors: taken from the file only when it changed the
    // port (its shaper, a class) since the state was written, or a class was
    // just taken from it.
    if (floors_problem(port) && !(port == file) && (!(was == file) || took_class)) {
      port = file;
      // The whole port covers what was listed of it.
      const std::string suffix = std::string(".") + kPortNames[p];
      std::erase_if(taken, [&](const std::string& k) {
        return k == "shaper" + suffix || (k.starts_with("classes.") && k.find(suffix) != std::string::npos);
      });
      taken.push_back(std::string("classes.*.") + kPortNames[p] +
                      " and shaper (the whole port: the saved floors did not fit with the file's)");
    }
  }
  return taken;
}

std::string config_jobs_unlike_state(const std::vector<JobSpec>& config_jobs, const JobRegistry& state_jobs) {
  std::vector<std::string> differences;
  auto same_but_rank = [](JobSpec a, const JobSpec& b) {
    a.rank = b.rank;
    return a == b;
  };
  std::set<uint32_t> in_config;
  for (const JobSpec& job : config_jobs) {
    in_config.insert(job.id);
    const JobRecord* saved = state_jobs.find(job.id);
    if (saved == nullptr) differences.push_back("job " + std::to_string(job.id) + " is not in the state file");
    else if (!same_but_rank(job, saved->spec)) differences.push_back("job " + std::to_string(job.id) + " differs");
  }
  for (const JobRecord* saved : state_jobs.in_age_order())
    if (!in_config.count(saved->spec.id))
      differences.push_back("job " + std::to_string(saved->spec.id) + " is not in the config");
  std::string out;
  constexpr size_t kNamed = 5;
  for (size_t i = 0; i < differences.size() && i < kNamed; ++i) out += (i ? ", " : "") + differences[i];
  if (differences.size() > kNamed) out += " and " + std::to_string(differences.size() - kNamed) + " more";
  return out;
}

}  // namespace psgate
