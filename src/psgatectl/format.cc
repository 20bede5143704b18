// SPDX-License-Identifier: BSD-3-Clause
#include "format.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <toml++/toml.h>

#include <sstream>

#include "psgate/cluster_layout.h"
#include "psgate/text.h"

namespace psgatectl {

namespace {

const ojson& null_json() {
  static const ojson kNull;
  return kNull;
}

// obj[key], or null when obj is not an object or has no such key.
const ojson& get(const ojson& obj, const char* key) {
  if (!obj.is_object()) return null_json();
  auto it = obj.find(key);
  return it == obj.end() ? null_json() : *it;
}

const ojson& get(const ojson& obj, const char* a, const char* b) { return get(get(obj, a), b); }

bool as_u64(const ojson& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

uint64_t u64_or_zero(const ojson& v) {
  uint64_t x = 0;
  return as_u64(v, x) ? x : 0;
}

// Byte counts for people: 1024-based with one decimal, as the config's sizes.
std::string bytes_text(const ojson& v) {
  if (!v.is_number()) return "-";
  const double b = v.get<double>();
  if (b < 1024) return value_text(v) + " B";
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double x = b / 1024;
  size_t u = 0;
  while (x >= 1024 && u + 1 < std::size(kUnits)) {
    x /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", x, kUnits[u]);
}

// A duration field in ms: integers as they are, fractions to 0.1 ms.
std::string ms_text(const ojson& v) {
  if (v.is_number_float()) return fmt::format("{:.1f}", v.get<double>());
  return value_text(v);
}

std::string ns_to_us_text(const ojson& v) {
  if (!v.is_number()) return "-";
  return fmt::format("{:.1f}", v.get<double>() / 1000.0);
}

std::string progress_text(const ojson& p) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : " ") + s; };
  const ojson& f = get(p, "fraction");
  if (f.is_number()) add(fmt::format("{:.1f}%", f.get<double>() * 100));
  if (!get(p, "iteration").is_null()) add("iter " + value_text(get(p, "iteration")));
  if (!get(p, "batch").is_null()) add("batch " + value_text(get(p, "batch")));
  return out.empty() ? "-" : out;
}

// "key  value" lines, keys padded to one width.
std::string key_values(const std::vector<std::pair<std::string, std::string>>& kv) {
  size_t w = 0;
  for (const auto& [k, v] : kv) w = std::max(w, display_width(k));
  std::string out;
  for (const auto& [k, v] : kv) {
    out += k + std::string(w - display_width(k) + 2, ' ') + v + "\n";
  }
  return out;
}

std::string duration_words(uint64_t s) {
  const uint64_t d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60, sec = s % 60;
  if (d > 0) return fmt::format("{}d {}h {}m {}s", d, h, m, sec);
  if (h > 0) return fmt::format("{}h {}m {}s", h, m, sec);
  if (m > 0) return fmt::format("{}m {}s", m, sec);
  return fmt::format("{}s", sec);
}

// Counter difference per second; "-" without a usable previous sample.
std::string rate_text(const ojson* prev_job, const ojson& cur_job, const char* dir, const char* key, double dt_s,
                      double scale, const char* fmt_spec) {
  if (prev_job == nullptr || !(dt_s > 0)) return "-";
  uint64_t a = 0, b = 0;
  const ojson& pv = dir != nullptr ? get(*prev_job, dir, key) : get(*prev_job, key);
  const ojson& cv = dir != nullptr ? get(cur_job, dir, key) : get(cur_job, key);
  if (!as_u64(pv, a) || !as_u64(cv, b) || b < a) return "-";
  return fmt::format(fmt::runtime(fmt_spec), static_cast<double>(b - a) * scale / dt_s);
}

const ojson* find_job(const ojson& stats, const ojson& id) {
  const ojson& jobs = get(stats, "jobs");
  if (!jobs.is_array()) return nullptr;
  for (const ojson& j : jobs) {
    if (get(j, "id") == id) return &j;
  }
  return nullptr;
}

void flatten(const ojson& v, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  if (v.is_object()) {
    if (v.empty()) out.emplace_back(prefix, "{}");
    for (auto it = v.begin(); it != v.end(); ++it) {
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
    }
  } else if (v.is_array()) {
    const bool scalars = std::none_of(v.begin(), v.end(), [](const ojson& e) { return e.is_structured(); });
    if (scalars) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + psgate::escape_control_chars(v[i].dump());
      out.emplace_back(prefix, s + "]");
    } else {
      for (size_t i = 0; i < v.size(); ++i) flatten(v[i], prefix + "[" + std::to_string(i) + "]", out);
    }
  } else {
    // dump() escapes C0 controls; bidi and invisible characters (a
    // gateway's name, etcd's error text) are escaped too, as in value_text.
    out.emplace_back(prefix, v.is_null() ? "none" : psgate::escape_control_chars(v.dump()));
  }
}

}  // namespace

size_t display_width(std::string_view text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::render(std::string_view indent) const {
  std::vector<size_t> width(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    width[c] = display_width(columns_[c].header);
    for (const auto& row : rows_) width[c] = std::max(width[c], display_width(row[c]));
  }
  auto line = [&](auto cell_of) {
    std::string out(indent);
    for (size_t c = 0; c < columns_.size(); ++c) {
      const std::string& text = cell_of(c);
      const std::string pad(width[c] - display_width(text), ' ');
      if (c > 0) out += "  ";
      out += columns_[c].align == kRight ? pad + text : text + pad;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line([&](size_t c) -> const std::string& { return columns_[c].header; });
  for (const auto& row : rows_) out += line([&](size_t c) -> const std::string& { return row[c]; });
  return out;
}

std::string value_text(const ojson& v, std::string_view null_text) {
  if (v.is_null()) return std::string(null_text);
  // The daemon's strings (names, etcd's error text, a reload's reasons)
  // reach a terminal: shown escaped, never acted on.
  if (v.is_string()) return psgate::escape_control_chars(v.get_ref<const std::string&>());
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_object()) {
    std::string out;
    for (auto it = v.begin(); it != v.end(); ++it) {
      out += (out.empty() ? "" : " ") + it.key() + "=" + value_text(it.value(), null_text);
    }
    return out.empty() ? "-" : out;
  }
  if (v.is_array()) {
    std::string out;
    for (const auto& e : v) out += (out.empty() ? "" : ", ") + value_text(e, null_text);
    return out;
  }
  return v.dump();
}

namespace {

// value_text with a "-" for nothing, an empty text too (a link's detail
// while it is up, a policy an older gateway does not report): a blank reads
// as a missing field or a misaligned column.
std::string shown_text(const ojson& v) {
  std::string text = value_text(v, "-");
  return text.empty() ? std::string("-") : text;
}

// A health value for the eye: an empty list says "none", other emptiness
// "-" (shown_text).
std::string health_text(const ojson& v) {
  if (v.is_array() && v.empty()) return "none";
  if (v.is_object() && !v.empty()) {
    std::string out;
    for (auto it = v.begin(); it != v.end(); ++it) {
      std::string text = health_text(*it);
      // A field's text with spaces ("no memif peer") quoted: key=value pairs
      // are split at spaces by eye and by scripts.
      if (it->is_string() && text.find(' ') != std::string::npos) text = "\"" + text + "\"";
      out += (out.empty() ? "" : " ") + it.key() + "=" + text;
    }
    return out;
  }
  return shown_text(v);
}

}  // namespace

std::string format_health(const ojson& result) {
  std::vector<std::pair<std::string, std::string>> kv;
  if (result.is_object()) {
    for (auto it = result.begin(); it != result.end(); ++it) {
      const ojson& v = it.value();
      // An object of objects (`links`: one per port) a row per member: on
      // one line their fields ran together ("host=changes=0 ... wire=...").
      if (v.is_object() && !v.empty() &&
          std::all_of(v.begin(), v.end(), [](const ojson& m) { return m.is_object(); })) {
        for (auto m = v.begin(); m != v.end(); ++m) kv.emplace_back(it.key() + "." + m.key(), health_text(*m));
        continue;
      }
      std::string text = health_text(v);
      uint64_t s = 0;
      if (it.key() == "uptime_s" && as_u64(v, s)) text += " (" + duration_words(s) + ")";
      kv.emplace_back(it.key(), text);
    }
  }
  return key_values(kv);
}

std::string format_jobs(const ojson& result) {
  using C = Table::Column;
  Table t({C{"ID", Table::kRight}, C{"NAME"}, C{"RANK", Table::kRight}, C{"CLASS", Table::kRight},
           C{"PULL CL", Table::kRight}, C{"PUSH CL", Table::kRight}, C{"POLICE"}, C{"PROGRESS"}, C{"MATCH"}});
  const ojson& jobs = get(result, "jobs");
  if (jobs.is_array()) {
    for (const ojson& j : jobs) {
      const ojson& rules = get(j, "match");
      std::vector<std::string> rule_text;
      if (rules.is_array()) {
        // The empty rule (every IP packet no earlier rule takes) said as
        // such, not as a blank that reads as a job without rules.
        for (const auto& r : rules)
          rule_text.push_back(r.is_string() && r.get_ref<const std::string&>().empty() ? "\"\" (every IP packet)"
                                                                                       : value_text(r));
      }
      if (rule_text.empty()) rule_text.push_back("-");
      t.add_row({value_text(get(j, "id")), value_text(get(j, "name")), value_text(get(j, "rank")),
                 value_text(get(j, "class")), value_text(get(j, "pull_class")), value_text(get(j, "push_class")),
                 value_text(get(j, "police"), "none"), progress_text(get(j, "progress")), rule_text[0]});
      // Further rules on their own lines under MATCH: rules contain commas.
      for (size_t i = 1; i < rule_text.size(); ++i) t.add_row({"", "", "", "", "", "", "", "", rule_text[i]});
    }
  }
  std::string out = t.render();
  if (t.rows() == 0) out += "(no jobs)\n";
  return out;
}

std::string format_stats(const ojson& result) {
  using C = Table::Column;
  std::string out;
  const ojson& ports = get(result, "ports");
  std::vector<std::string> port_names;
  if (ports.is_object()) {
    for (auto it = ports.begin(); it != ports.end(); ++it) port_names.push_back(it.key());
  }

  // Ports, transposed: one row per counter, one column per port; keys as the
  // daemon names them, so a new counter shows up without a client change.
  {
    std::vector<C> cols{C{"Ports"}};
    for (const auto& p : port_names) cols.push_back(C{p, Table::kRight});
    Table t(cols);
    std::vector<std::string> keys;
    if (!port_names.empty()) {
      const ojson& first = ports[port_names[0]];
      // A port that is not an object (a daemon of another version, or not
      // psgate) has no counters to list; walking it would throw.
      for (auto it = first.begin(); first.is_object() && it != first.end(); ++it) {
        if (it.key() == "drops") continue;
        if (it.value().is_object()) {
          for (auto jt = it.value().begin(); jt != it.value().end(); ++jt) keys.push_back(it.key() + "." + jt.key());
        } else {
          keys.push_back(it.key());
        }
      }
    }
    for (const auto& key : keys) {
      std::vector<std::string> row{"  " + key};
      const size_t dot = key.find('.');
      for (const auto& p : port_names) {
        const ojson& v = dot == std::string::npos
                             ? get(ports[p], key.c_str())
                             : get(ports[p], key.substr(0, dot).c_str(), key.substr(dot + 1).c_str());
        row.push_back(shown_text(v));
      }
      t.add_row(row);
    }
    out += t.render();
  }

  // Drops by reason, per egress port, with a total row.
  {
    std::vector<C> cols{C{"Drops by reason (packets)"}};
    for (const auto& p : port_names) cols.push_back(C{p, Table::kRight});
    Table t(cols);
    std::vector<std::string> reasons;
    if (!port_names.empty()) {
      const ojson& d = get(ports[port_names[0]], "drops");
      if (d.is_object()) {
        for (auto it = d.begin(); it != d.end(); ++it) reasons.push_back(it.key());
      }
    }
    std::vector<uint64_t> total(port_names.size(), 0);
    for (const auto& r : reasons) {
      std::vector<std::string> row{"  " + r};
      for (size_t i = 0; i < port_names.size(); ++i) {
        const ojson& v = get(ports[port_names[i]], "drops", r.c_str());
        total[i] += u64_or_zero(v);
        row.push_back(value_text(v));
      }
      t.add_row(row);
    }
    std::vector<std::string> row{"  total"};
    for (uint64_t x : total) row.push_back(std::to_string(x));
    t.add_row(row);
    out += "\n" + t.render();
  }

  // Classes that saw traffic, with sojourn percentiles (RX to TX) in µs.
  {
    Table t({C{"PORT"}, C{"CLASS", Table::kRight}, C{"ENQUEUED", Table::kRight}, C{"SENT", Table::kRight},
             C{"DEPTH", Table::kRight}, C{"QUEUE FULL", Table::kRight}, C{"RING FULL", Table::kRight},
             C{"ECN", Table::kRight}, C{"DSCP", Table::kRight}, C{"P50 µs", Table::kRight}, C{"P99 µs", Table::kRight},
             C{"P99.9 µs", Table::kRight}, C{"MAX µs", Table::kRight}});
    const ojson& classes = get(result, "classes");
    if (classes.is_array()) {
      for (const ojson& c : classes) {
        const bool used = u64_or_zero(get(c, "enqueued_packets")) + u64_or_zero(get(c, "dequeued_packets")) +
                              u64_or_zero(get(c, "depth")) + u64_or_zero(get(c, "drop_queue_full")) +
                              u64_or_zero(get(c, "drop_ring_full")) >
                          0;
        if (!used) continue;
        const ojson& soj = get(c, "sojourn");
        const bool has_soj = u64_or_zero(get(soj, "count")) > 0;
        auto us = [&](const char* k) { return has_soj ? ns_to_us_text(get(soj, k)) : "-"; };
        t.add_row({value_text(get(c, "port")), value_text(get(c, "class")), value_text(get(c, "enqueued_packets")),
                   value_text(get(c, "dequeued_packets")), value_text(get(c, "depth")),
                   value_text(get(c, "drop_queue_full")), value_text(get(c, "drop_ring_full")),
                   value_text(get(c, "ecn_marked")), value_text(get(c, "dscp_remarked")), us("p50_ns"), us("p99_ns"),
                   us("p999_ns"), us("max_ns")});
      }
    }
    out += "\nClasses with traffic (packets; sojourn from RX to TX)\n";
    out += t.rows() > 0 ? t.render("  ") : "  (none)\n";
  }

  // Jobs: sent packets and bytes per direction, losses, telemetry.
  {
    Table t({C{"ID", Table::kRight}, C{"NAME"}, C{"RANK", Table::kRight}, C{"CLASS", Table::kRight},
             C{"PULL PKTS", Table::kRight}, C{"PULL BYTES", Table::kRight}, C{"PUSH PKTS", Table::kRight},
             C{"PUSH BYTES", Table::kRight}, C{"POLICED", Table::kRight}, C{"DROPS", Table::kRight},
             C{"ITERATIONS", Table::kRight}, C{"BYTES/ITER", Table::kRight}, C{"PERIOD ms", Table::kRight},
             C{"BURST ms", Table::kRight}, C{"STRAGGLER ms", Table::kRight}});
    const ojson& jobs = get(result, "jobs");
    if (jobs.is_array()) {
      for (const ojson& j : jobs) {
        const ojson& tel = get(j, "telemetry");
        t.add_row({value_text(get(j, "id")), value_text(get(j, "name")), value_text(get(j, "rank")),
                   value_text(get(j, "class")), value_text(get(j, "pull", "sent_packets")),
                   value_text(get(j, "pull", "sent_bytes")), value_text(get(j, "push", "sent_packets")),
                   value_text(get(j, "push", "sent_bytes")), value_text(get(j, "policed")), value_text(get(j, "drops")),
                   value_text(get(tel, "iterations")), bytes_text(get(tel, "bytes_per_iteration")),
                   ms_text(get(tel, "iteration_period_ms")), ms_text(get(tel, "last_burst_ms")),
                   ms_text(get(tel, "straggler_wait_ms"))});
      }
    }
    out += "\nJobs (sent packets and bytes by direction; pull = from the PS)\n";
    out += t.rows() > 0 ? t.render("  ") : "  (no jobs)\n";
  }

  const ojson& totals = get(result, "totals");
  out += "\nTotals: received " + value_text(get(totals, "received")) + ", transmitted " +
         value_text(get(totals, "transmitted")) + ", dropped " + value_text(get(totals, "dropped")) + ", conserved " +
         value_text(get(totals, "conserved"));
  // A live read: what is queued inside psgate is neither sent nor dropped yet.
  if (totals.contains("in_flight") && get(totals, "in_flight") != 0)
    out += " (in flight " + value_text(get(totals, "in_flight")) + ")";
  out += "\n";
  return out;
}

std::string format_reload(const ojson& result) {
  auto list = [](const ojson& a) {
    std::string out;
    if (a.is_array())
      for (const ojson& k : a) out += (out.empty() ? "" : ", ") + value_text(k);
    return out;
  };
  std::string out = "reloaded " + value_text(get(result, "file")) + "\n";
  const std::string applied = list(get(result, "applied"));
  out += "applied: " + (applied.empty() ? std::string("nothing changed that can be applied in place") : applied) + "\n";
  if (const std::string r = list(get(result, "restart_needed")); !r.empty()) out += "needs a restart: " + r + "\n";
  if (const ojson& n = get(result, "not_applied"); n.is_array())
    for (const ojson& e : n)
      out += "not applied: " + value_text(get(e, "key")) + ": " + value_text(get(e, "why")) + "\n";
  return out;
}

std::string format_config(const ojson& result) {
  std::vector<std::pair<std::string, std::string>> kv;
  flatten(result, "", kv);
  size_t w = 0;
  for (const auto& [k, v] : kv) w = std::max(w, display_width(k));
  std::string out;
  for (const auto& [k, v] : kv) out += k + std::string(w - display_width(k), ' ') + " = " + v + "\n";
  return out;
}

namespace {

// JSON -> TOML node: objects become tables, arrays arrays (of tables: [[x]]).
// Every value of a `config` reply is one of these.
psgate::Result<bool> to_toml(const ojson& v, const std::string& path, toml::table& into, const std::string& key);

psgate::Result<bool> to_toml_array(const ojson& v, const std::string& path, toml::array& into) {
  for (size_t i = 0; i < v.size(); ++i) {
    const ojson& e = v[i];
    const std::string at = path + "[" + std::to_string(i) + "]";
    if (e.is_object()) {
      toml::table t;
      for (auto it = e.begin(); it != e.end(); ++it)
        if (auto ok = to_toml(it.value(), at + "." + it.key(), t, it.key()); !ok) return ok;
      into.push_back(std::move(t));
    } else if (e.is_string()) {
      into.push_back(e.get<std::string>());
    } else if (e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return psgate::Result<bool>::failure(at + ": " + e.dump() + " is beyond TOML's integers");
    } else if (e.is_number_integer()) {
      into.push_back(e.get<int64_t>());
    } else {
      return psgate::Result<bool>::failure(at + ": " + e.type_name() + " has no TOML form here");
    }
  }
  return true;
}

psgate::Result<bool> to_toml(const ojson& v, const std::string& path, toml::table& into, const std::string& key) {
  if (v.is_null()) return true;
  if (v.is_object()) {
    toml::table t;
    for (auto it = v.begin(); it != v.end(); ++it)
      if (auto ok = to_toml(it.value(), path + "." + it.key(), t, it.key()); !ok) return ok;
    into.insert_or_assign(key, std::move(t));
  } else if (v.is_array()) {
    toml::array a;
    if (auto ok = to_toml_array(v, path, a); !ok) return ok;
    into.insert_or_assign(key, std::move(a));
  } else if (v.is_string()) {
    into.insert_or_assign(key, v.get<std::string>());
  } else if (v.is_boolean()) {
    into.insert_or_assign(key, v.get<bool>());
  } else if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return psgate::Result<bool>::failure(path + ": " + v.dump() + " is beyond TOML's integers");
  } else if (v.is_number_integer()) {
    into.insert_or_assign(key, v.get<int64_t>());
  } else {
    into.insert_or_assign(key, v.get<double>());
  }
  return true;
}

}  // namespace

psgate::Result<std::string> format_config_toml(const ojson& result) {
  if (!result.is_object()) return psgate::Result<std::string>::failure("the config reply is not an object");
  toml::table root;
  for (auto it = result.begin(); it != result.end(); ++it)
    if (auto ok = to_toml(it.value(), it.key(), root, it.key()); !ok)
      return psgate::Result<std::string>::failure(ok.error());
  std::ostringstream out;
  out << "# The configuration in force on a running psgate (psgatectl config --toml):\n"
         "# the file it was started from with every change made over the control socket\n"
         "# since (shapers, classes, jobs and their ranks, the policy). `psgate --config\n"
         "# THIS_FILE` starts a gateway that runs the same; a state file named in\n"
         "# [control] still wins over [[jobs]], [policy] and the class settings if it exists.\n\n"
      << root << "\n";
  return out.str();
}

std::string format_cluster(const ojson& result) {
  if (value_text(get(result, "mode")) != "cluster") return "single-host mode (no [cluster] in the config)\n";
  std::string out = fmt::format("cluster {}: store revision {}, {}; leader {}\n", value_text(get(result, "prefix")),
                                value_text(get(result, "store_revision")),
                                get(result, "connected") == true ? "connected" : "STORE UNREACHABLE",
                                value_text(get(result, "leader"), "none"));
  using C = Table::Column;
  Table t({C{"GATEWAY"}, C{"ADDRESS"}, C{"VERSION"}, C{"HEALTH"}, C{"POLICY"}, C{"APPLIED", Table::kRight},
           C{"LAG", Table::kRight}, C{"TOP JOB", Table::kRight}, C{"RX PKTS", Table::kRight},
           C{"TX PKTS", Table::kRight}, C{"DROPPED", Table::kRight}});
  // Round-robin's parameters with its name, as health's trouble names
  // them: "round-robin(500ms)", "round-robin(iteration,20s)".
  // A gateway that does not say (an older version's registration: the
  // daemon reports its policy as "") or has no top job: "-", not a blank.
  const auto policy = [](const ojson& g) {
    std::string text = shown_text(get(g, "policy"));
    const ojson& p = get(g, "policy_params");
    if (text == "-" || !p.is_object() || !get(p, "interval").is_string()) return text;
    return psgate::policy_label(text, value_text(get(p, "interval")), value_text(get(p, "rotate_on")));
  };
  const ojson& gws = get(result, "gateways");
  if (gws.is_array()) {
    for (const ojson& g : gws) {
      const ojson& c = get(g, "counters");
      t.add_row({value_text(get(g, "name")), value_text(get(g, "address")), value_text(get(g, "version")),
                 value_text(get(g, "health")), policy(g), value_text(get(g, "applied_revision")),
                 value_text(get(g, "lag")), shown_text(get(g, "top_job")), value_text(get(c, "rx_packets")),
                 value_text(get(c, "tx_packets")), value_text(get(c, "dropped"))});
    }
  }
  out += t.render("");
  const ojson& unleased = get(result, "unleased_registrations");
  if (unleased.is_array() && !unleased.empty()) {
    std::string names;
    for (const ojson& n : unleased) names += (names.empty() ? "" : ", ") + value_text(n);
    out += "registrations without a lease, not listed (put by hand; they never expire): " + names + "\n";
  }
  return out;
}

std::string format_policy(const ojson& result) {
  const ojson& p = result.contains("policy") ? result["policy"] : result;
  std::vector<std::pair<std::string, std::string>> kv;
  if (p.is_object()) {
    for (auto it = p.begin(); it != p.end(); ++it) kv.emplace_back(it.key(), value_text(it.value()));
  }
  return key_values(kv);
}

std::string format_confirmation(Kind kind, const nlohmann::json& request, const ojson& result) {
  // Cluster mode: in the store, not yet in force here; the reply has no
  // job or order to show.
  if (get(result, "applied_here") == ojson(false)) {
    return "written to the cluster store at revision " + value_text(get(result, "store_revision")) +
           "; not yet applied on this gateway (see psgatectl cluster)\n";
  }
  const ojson& job = get(result, "job");
  if (job.is_null() && !get(result, "store_revision").is_null() &&
      (kind == Kind::kJobsAdd || kind == Kind::kRank || kind == Kind::kProgress)) {
    return "written to the cluster store at revision " + value_text(get(result, "store_revision")) +
           " and applied; the job has been removed since (by another writer)\n";
  }
  switch (kind) {
    case Kind::kJobsAdd:
      return fmt::format("added job {} ({}): rank {}, class {}, {} rule{}\n", value_text(get(job, "id")),
                         value_text(get(job, "name")), value_text(get(job, "rank")), value_text(get(job, "class")),
                         get(job, "match").size(), get(job, "match").size() == 1 ? "" : "s");
    case Kind::kJobsLoad: {
      const ojson& added = get(result, "added");
      return fmt::format("added {} job{}\n", added.size(), added.size() == 1 ? "" : "s");
    }
    case Kind::kJobsRemove: {
      const ojson& removed = get(result, "removed");
      const ojson& note = get(result, "note");
      return "removed job " + (removed.is_null() ? value_text(get(request, "job")) : value_text(removed)) +
             (note.is_string() ? ": " + value_text(note) : std::string()) + "\n";
    }
    case Kind::kOrder: {
      std::string ids;
      const ojson& jobs = get(result, "jobs");
      if (jobs.is_array()) {
        for (const ojson& j : jobs) ids += (ids.empty() ? "" : " ") + value_text(get(j, "id"));
      }
      return "order set, highest priority first: " + (ids.empty() ? "(no jobs)" : ids) + "\n";
    }
    case Kind::kRank:
    case Kind::kProgress: {
      std::string line = "job " + value_text(get(job, "id")) + ": rank " + value_text(get(job, "rank")) + ", class " +
                         value_text(get(job, "class"));
      if (kind == Kind::kProgress) line += ", progress " + progress_text(get(job, "progress"));
      return line + "\n";
    }
    case Kind::kClassSet:
      return fmt::format("{} class {}: cap {}, floor {}, ecn_threshold {}, dscp {}\n", value_text(get(result, "port")),
                         value_text(get(result, "class")), value_text(get(result, "cap"), "none"),
                         value_text(get(result, "floor"), "none"), value_text(get(result, "ecn_threshold")),
                         value_text(get(result, "dscp"), "keep"));
    case Kind::kShaperSet:
      if (get(result, "rate").is_null()) return value_text(get(result, "port")) + " shaper: none (unshaped)\n";
      return fmt::format("{} shaper: rate {}, burst {}\n", value_text(get(result, "port")),
                         value_text(get(result, "rate")), value_text(get(result, "burst")));
    case Kind::kPolicySet: {
      const ojson& p = get(result, "policy");
      std::string line = "policy " + value_text(get(p, "name")) + ", interval " + value_text(get(p, "interval"));
      if (!get(p, "rotate_on").is_null()) line += ", rotate on " + value_text(get(p, "rotate_on"));
      return line + "\n";
    }
    default:
      return value_text(result) + "\n";
  }
}

std::string format_result(Kind kind, const nlohmann::json& request, const ojson& result) {
  switch (kind) {
    case Kind::kHealth:
      return format_health(result);
    case Kind::kJobsList:
      return format_jobs(result);
    case Kind::kStats:
    case Kind::kStatsWatch:
      return format_stats(result);
    case Kind::kConfig:
      return format_config(result);
    case Kind::kConfigToml: {
      auto text = format_config_toml(result);
      return text ? *text : "psgatectl: " + text.error() + "\n";
    }
    case Kind::kPolicyShow:
      return format_policy(result);
    case Kind::kCluster:
      return format_cluster(result);
    case Kind::kReload:
      return format_reload(result);
    default:
      return format_confirmation(kind, request, result);
  }
}

std::string format_watch(const ojson* prev, const ojson& cur, double dt_s) {
  using C = Table::Column;
  Table t({C{"ID", Table::kRight}, C{"NAME"}, C{"RANK", Table::kRight}, C{"CLASS", Table::kRight},
           C{"PULL Mbit/s", Table::kRight}, C{"PUSH Mbit/s", Table::kRight}, C{"POLICED/s", Table::kRight},
           C{"DROPS/s", Table::kRight}, C{"ITERATIONS", Table::kRight}, C{"BYTES/ITER", Table::kRight},
           C{"PERIOD ms", Table::kRight}, C{"BURST ms", Table::kRight}, C{"STRAGGLER ms", Table::kRight}});
  const ojson& jobs = get(cur, "jobs");
  if (jobs.is_array()) {
    for (const ojson& j : jobs) {
      const ojson* pj = prev != nullptr ? find_job(*prev, get(j, "id")) : nullptr;
      const ojson& tel = get(j, "telemetry");
      t.add_row({value_text(get(j, "id")), value_text(get(j, "name")), value_text(get(j, "rank")),
                 value_text(get(j, "class")), rate_text(pj, j, "pull", "sent_bytes", dt_s, 8e-6, "{:.1f}"),
                 rate_text(pj, j, "push", "sent_bytes", dt_s, 8e-6, "{:.1f}"),
                 rate_text(pj, j, nullptr, "policed", dt_s, 1, "{:.0f}"),
                 rate_text(pj, j, nullptr, "drops", dt_s, 1, "{:.0f}"), value_text(get(tel, "iterations")),
                 bytes_text(get(tel, "bytes_per_iteration")), ms_text(get(tel, "iteration_period_ms")),
                 ms_text(get(tel, "last_burst_ms")), ms_text(get(tel, "straggler_wait_ms"))});
    }
  }
  std::string out = t.render();
  if (t.rows() == 0) out += "(no jobs)\n";
  // Port egress rates under the table: what the shaper let out.
  const ojson& ports = get(cur, "ports");
  if (ports.is_object()) {
    std::string line;
    for (auto it = ports.begin(); it != ports.end(); ++it) {
      const ojson* pp = prev != nullptr ? &get(get(*prev, "ports"), it.key().c_str()) : nullptr;
      if (pp != nullptr && pp->is_null()) pp = nullptr;
      line += (line.empty() ? "" : ", ") + it.key() + " tx " +
              rate_text(pp, it.value(), nullptr, "tx_bytes", dt_s, 8e-6, "{:.1f}") + " Mbit/s";
    }
    out += "ports: " + line + "\n";
  }
  return out;
}

}  // namespace psgatectl
