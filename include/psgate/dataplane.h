// The data plane as a whole: builds ports, pools, rings, schedulers and lcore
// roles from a validated config (after EAL init), runs the lcores, and stops
// them gracefully.
//
// Lcore roles from [lcores] data (N lcores):
//   N = 1   one run-to-completion lcore: RX both ports, schedule and TX both
//   N = 2   one RX lcore, one scheduler/TX lcore for both egress ports
//   N >= 3  N-2 RX lcores (RX queue k of each port, RSS spreads flows), and one
//           scheduler/TX lcore per egress port (wire, then host)
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "psgate/config.h"
#include "psgate/counters.h"
#include "psgate/job_telemetry.h"
#include "psgate/result.h"
#include "psgate/snapshot.h"

namespace psgate {

// A port's link as the control path last saw it.
struct PortLink {
  bool up = true;
  uint64_t since_unix_ns = 0;  // when it last changed (or psgate started)
  uint64_t changes = 0;        // up/down transitions since start
  std::string detail;          // why it is down; empty when up
};

struct PortTotals {
  uint64_t rx_packets = 0, rx_bytes = 0, rx_malformed = 0, rx_network_control = 0, rx_unclassified = 0;
  uint64_t tx_packets = 0, tx_bytes = 0;
  uint64_t drops[kDropReasonCount] = {};
  uint64_t rerank_migrations = 0, rerank_deferred = 0;
  // Driver-level counts (rte_eth_stats): frames lost before psgate saw them.
  uint64_t nic_imissed = 0, nic_ierrors = 0, nic_rx_nombuf = 0, nic_oerrors = 0;
  PortLink link;
  uint64_t drop_total() const {
    uint64_t t = 0;
    for (uint64_t d : drops) t += d;
    return t;
  }
};

struct ClassTotals {
  uint64_t enqueued_packets = 0, enqueued_bytes = 0, dequeued_packets = 0, dequeued_bytes = 0;
  uint64_t drop_queue_full = 0, drop_ring_full = 0, ecn_marked = 0, dscp_remarked = 0;
  uint64_t migrated_in = 0, migrated_out = 0;
  LatencyHistogram sojourn;
  uint64_t depth() const { return enqueued_packets + migrated_in - dequeued_packets - migrated_out; }
};

struct JobTotals {
  uint64_t admitted_packets[2] = {}, admitted_bytes[2] = {};  // by Direction
  uint64_t sent_packets[2] = {}, sent_bytes[2] = {};
  uint64_t policed = 0, drops = 0;
};

struct FlowCacheTotals {
  uint64_t hits = 0, misses = 0, evictions = 0;
};

struct Totals {
  PortTotals ports[kPortCount];
  FlowCacheTotals flow_cache;  // all RX lcores
  std::vector<ClassTotals> classes;  // [port * class_count + class]
  std::vector<JobTotals> jobs;       // by slot
  unsigned class_count = 0;
  const ClassTotals& cls(unsigned port, unsigned c) const { return classes[port * class_count + c]; }
  uint64_t rx_total() const { return ports[0].rx_packets + ports[1].rx_packets; }
  uint64_t tx_total() const { return ports[0].tx_packets + ports[1].tx_packets; }
  uint64_t drop_total() const { return ports[0].drop_total() + ports[1].drop_total(); }
};

class Dataplane {
 public:
  // EAL must be initialised with the lcores and devices of `config`.
  static Result<std::unique_ptr<Dataplane>> create(const ConfigSpec& config);
  ~Dataplane();

  void start();
  // Instead of start(): one pass of the run-to-completion loop on the calling
  // thread (receive a burst on each port, schedule, transmit), for in-process
  // tests and the packet-path fuzzer, which need every packet's fate
  // synchronously. Returns false (and does nothing) unless the data plane has
  // one data lcore and was not started.
  bool run_once();
  // Stop receiving; lcores drain their queues until empty or until the drain
  // timeout, then exit. Blocks until every data lcore returned.
  void stop_and_drain();

  // Sums every lcore's counters (safe while running; histograms only when stopped
  // are exact, while running they may be mid-update by a few samples).
  Totals read_totals(bool with_histograms) const;
  const Snapshot& snapshot() const;
  // Pull-burst telemetry of a job slot (any thread).
  JobTelemetry job_telemetry(uint32_t slot) const;
  uint64_t tsc_hz() const;
  SnapshotPublisher& publisher();
  const ConfigSpec& config() const;
  std::string describe_lcores() const;

  // Control thread, every 100 ms: reads every port's link (driver status, or
  // the kernel interface of an af_packet port), publishes changes to the data
  // lcores and, for a port going down, waits until no lcore touches it any
  // more; detaches an af_packet port whose interface is gone and probes it
  // again when the interface is back.
  void poll_links();
  std::array<PortLink, kPortCount> links() const;

  struct Impl;

 private:
  explicit Dataplane(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// EAL arguments for `config`: program name, [eal] args, --lcores, and one
// --vdev (net_* devices) or -a (PCI and other bus devices) per port.
std::vector<std::string> eal_arguments(const ConfigSpec& config, const std::string& program);

}  // namespace psgate
