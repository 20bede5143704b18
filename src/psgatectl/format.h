// SPDX-License-Identifier: BSD-3-Clause
// Human-readable output of psgatectl: aligned tables from the daemon's JSON
// results. Pure functions of the JSON (and, for --watch, of the time between
// two replies), so tests feed them sample replies. Missing or null fields print
// as "-" rather than failing: the table is for reading, --json is for programs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "psgate/result.h"

namespace psgatectl {

using ojson = nlohmann::ordered_json;

// Columns separated by two spaces, each as wide as its widest cell counted in
// characters (UTF-8 aware, for "µs"); trailing blanks trimmed.
class Table {
 public:
  enum Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = kLeft;
  };
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
  void add_row(std::vector<std::string> cells);  // missing cells are blank
  std::string render(std::string_view indent = "") const;
  size_t rows() const { return rows_.size(); }

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// Display width of UTF-8 text: code points, not bytes.
size_t display_width(std::string_view text);

// The text of a scalar: strings unquoted, null as `null_text`, numbers as JSON
// writes them, booleans yes/no; objects as "k=v k=v", arrays comma-separated.
std::string value_text(const ojson& v, std::string_view null_text = "-");

// Read commands without --json.
std::string format_health(const ojson& result);
std::string format_jobs(const ojson& result);    // {"jobs": [JOB...]}
std::string format_stats(const ojson& result);   // ports, drops by reason, classes, jobs, totals
std::string format_config(const ojson& result);  // flattened "a.b.c = value" lines
// config --toml: the result (the config file's tables and keys) as a TOML
// file that `psgate --config` starts from, after a comment saying what it is.
// Nulls are left out (TOML has none); a value TOML cannot hold is an error.
psgate::Result<std::string> format_config_toml(const ojson& result);
std::string format_policy(const ojson& result);   // {"policy": {...}}
std::string format_cluster(const ojson& result);  // the cluster command's reply
std::string format_reload(const ojson& result);   // what a reload applied and left

// Write commands: one line (with '\n') built from the request and its result.
std::string format_confirmation(Kind kind, const nlohmann::json& request, const ojson& result);

// Everything for a reply to `kind` without --json (dispatch over the above).
std::string format_result(Kind kind, const nlohmann::json& request, const ojson& result);

// stats --watch: one frame of the per-job table. `prev` is the previous stats
// result (nullptr for the first frame: rates print "-"), `dt_s` the seconds
// between the two replies. Rates come from differences of the counters, which
// only count up; a counter that went down (daemon restarted) prints "-".
std::string format_watch(const ojson* prev, const ojson& cur, double dt_s);

}  // namespace psgatectl
