// SPDX-License-Identifier: BSD-3-Clause
// The jobs file of `psgatectl jobs load` (see jobs_file.h).
#include "jobs_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <unordered_set>

#include "psgate/control_request.h"
#include "psgate/text.h"

namespace psgatectl {

using nlohmann::json;
using psgate::Result;

namespace {

constexpr int kFifoWriterWaitMs = 10'000;

// The file's text, at most kMaxJobsFileBytes of it. Opened without waiting
// (a FIFO nobody writes to reads as empty instead of hanging past
// --timeout); a pipe with a writer (`jobs load <(gen)`) is read to its end.
Result<std::string> read_bounded(const std::string& path) {
  using R = Result<std::string>;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return R::failure(path + ": cannot read: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    ::close(fd);
    return R::failure(path + ": is a directory, not a jobs file");
  }
  // A FIFO: its writer may come a little after (`gen > p & psgatectl jobs
  // load p`); a reader that never sees one is told so instead of waiting for
  // ever. (Linux reports nothing on a FIFO that never had a writer.)
  if (S_ISFIFO(st.st_mode)) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, kFifoWriterWaitMs) == 0) {
      ::close(fd);
      return R::failure(path + ": a FIFO nobody wrote to within " + std::to_string(kFifoWriterWaitMs / 1000) + " s");
    }
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::string text;
  const int err = psgate::read_text_fd(fd, text, kMaxJobsFileBytes);
  ::close(fd);
  if (err == EFBIG)
    return R::failure(path + ": larger than " + std::to_string(kMaxJobsFileBytes >> 20) + " MiB; split it");
  if (err != 0) return R::failure(path + ": cannot read: " + std::strerror(err));
  return text;
}

}  // namespace

Result<json> read_jobs_file(const std::string& path) {
  using R = Result<json>;
  auto text = read_bounded(path);
  if (!text) return R::failure(text.error());
  // The daemon refuses a request with a repeated key, so the file is refused
  // for one, not read with the last value.
  psgate::JsonNotingDuplicates parsed = psgate::parse_json_noting_duplicates(*text);
  if (auto why = psgate::strict_json_problem(parsed)) return R::failure(path + ": " + *why);
  json doc = std::move(parsed.value);
  if (doc.is_object()) {
    // As strict as a request: a misspelt key is an error, not ignored.
    for (const auto& [key, value] : doc.items())
      if (key != "jobs") return R::failure(path + ": unknown key " + json(key).dump() + " (the object holds \"jobs\")");
    if (doc.contains("jobs")) doc = doc["jobs"];
  }
  if (!doc.is_array() || doc.empty())
    return R::failure(path + ": expected a non-empty list of jobs (or an object with one under \"jobs\")");
  std::unordered_set<uint64_t> ids;
  for (size_t i = 0; i < doc.size(); ++i) {
    const json& job = doc[i];
    const std::string where = path + ": jobs[" + std::to_string(i) + "]";
    if (!job.is_object() || job.contains("cmd") || job.contains("id"))
      return R::failure(where + ": a job is an object with jobs.add's arguments (the job id is \"job\")");
    json add = job;
    add["cmd"] = "jobs.add";
    // class_count does not matter to jobs.add; 2 is the smallest valid one.
    auto parsed = psgate::parse_control_request(add, 2);
    if (!parsed) return R::failure(where + ": " + parsed.error());
    if (!ids.insert(job["job"].get<uint64_t>()).second)
      return R::failure(where + ": job " + std::to_string(job["job"].get<uint64_t>()) + " is listed twice");
  }
  return doc;
}

Result<std::vector<json>> split_jobs(const json& jobs, size_t max_line, size_t max_jobs) {
  using R = Result<std::vector<json>>;
  const size_t overhead = json{{"cmd", "jobs.load"}, {"jobs", json::array()}}.dump().size();
  std::vector<json> groups;
  json group = json::array();
  size_t size = overhead;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const size_t job_size = jobs[i].dump().size() + 1;  // and a comma
    if (overhead + job_size > max_line)
      return R::failure("jobs[" + std::to_string(i) + "] is larger than one request may be (" +
                        std::to_string(max_line) + " bytes)");
    if (!group.empty() && (size + job_size > max_line || group.size() >= max_jobs)) {
      groups.push_back(std::move(group));
      group = json::array();
      size = overhead;
    }
    group.push_back(jobs[i]);
    size += job_size;
  }
  if (!group.empty()) groups.push_back(std::move(group));
  return groups;
}

}  // namespace psgatectl
