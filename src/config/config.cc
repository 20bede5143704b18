// SPDX-License-Identifier: BSD-3-Clause
// TOML text -> validated ConfigSpec (stage one of three, see config.h): the
// schema of the config file, read with psgate/toml_reader.h.
//
// Every problem is reported as ONE line naming the key the operator must fix:
//   <source>: <key.path>: <problem>        (validation)
//   <source>:<line>:<col>: <problem>       (TOML syntax)
// The first problem wins; keys are visited in a fixed order so the same file
// always reports the same error. Unknown keys are errors everywhere: a typo
// such as "ecn_treshold" must not silently fall back to the default.
#include "psgate/config.h"
#include "psgate/eal_arg_clash.h"
#include "psgate/text.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <unistd.h>

#include <sys/stat.h>
#include <toml++/toml.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>

#include "config/config_json.h"
#include "psgate/packet_parser.h"
#include "psgate/toml_reader.h"
#include "psgate/units.h"

namespace psgate {
namespace {

constexpr unsigned kMaxLcore = 127;
constexpr uint64_t kMaxOverheadBytes = 64;
// A fixed headroom of at most 64 KiB per class step (reserves are capped at
// 3/4 of the burst anyway: class_scheduler.h).
constexpr uint64_t kMaxHeadroomBytes = 65536;
constexpr uint32_t kMinMtu = 68;
constexpr uint32_t kMaxMtu = 65535 - 14 - 4 * kMaxVlanTags;  // the largest frame an mbuf chain can describe
constexpr size_t kMaxSocketPathBytes = 107;                  // sizeof(sockaddr_un::sun_path) - 1

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

class Parser : TomlReader {
 public:
  explicit Parser(std::string_view source) : TomlReader(source) {}

  Result<ConfigSpec> run(const toml::table& root) {
    ConfigSpec c;
    c.source = source();
    parse_all(root, c);
    if (failed()) return Result<ConfigSpec>::failure(error());
    return c;
  }

 private:
  bool rate(const toml::table& t, std::string_view key, const std::string& path, std::optional<uint64_t>& out,
            bool required = false) {
    if (!quantity(t, key, path, parse_rate_bps, "9.5Gbit/s", out, required)) return false;
    if (out)
      if (auto problem = check_rate_bps(*out)) return fail(key_path(path, key), *problem);
    return true;
  }

  bool burst(const toml::table& t, std::string_view key, const std::string& path, std::optional<uint64_t>& out,
             bool required = false) {
    if (!quantity(t, key, path, parse_size_bytes, "64KiB", out, required)) return false;
    if (out)
      if (auto problem = check_burst_bytes(*out)) return fail(key_path(path, key), *problem);
    return true;
  }

  bool duration(const toml::table& t, std::string_view key, const std::string& path, uint64_t& out) {
    std::optional<uint64_t> v;
    if (!quantity(t, key, path, parse_duration_ns, "500ms", v)) return false;
    if (v) out = *v;
    return true;
  }

  // `<rate_key>` plus an optional `<burst_key>` -> RateSpec. `out` may hold
  // what the table inherits ([classes.N.<port>] over [classes.N]): a rate
  // alone keeps the inherited burst, a burst alone changes the inherited
  // rate's. Otherwise the burst defaults to 64KiB, and a burst needs a rate.
  bool rate_pair(const toml::table& t, std::string_view rate_key, std::string_view burst_key, const std::string& path,
                 std::optional<RateSpec>& out) {
    std::optional<uint64_t> r, b;
    if (!rate(t, rate_key, path, r) || !burst(t, burst_key, path, b)) return false;
    if (b && !r && !out) {
      return fail(key_path(path, burst_key), "given without " + std::string(rate_key) + " (set both or neither)");
    }
    if (r) out = RateSpec{*r, b.value_or(out ? out->burst_bytes : kDefaultBurstBytes)};
    else if (b) out->burst_bytes = *b;
    return true;
  }

  void parse_all(const toml::table& root, ConfigSpec& c) {
    if (!check_keys(root, "",
                    {"eal", "ports", "lcores", "shaper", "classes", "jobs", "dataplane", "stats", "log", "control",
                     "metrics", "policy", "cluster"})) {
      return;
    }
    parse_eal(root, c) && parse_ports(root, c) && parse_lcores(root, c) && parse_shaper(root, c) &&
        parse_classes(root, c) && parse_jobs(root, c) && parse_dataplane(root, c) && parse_stats(root, c) &&
        parse_log(root, c) && parse_control(root, c) && parse_metrics(root, c) && parse_policy(root, c) &&
        parse_cluster(root, c) && floors_fit(c);
  }

  // The floors of each port against its shaper (check_floors_fit).
  bool floors_fit(const ConfigSpec& c) {
    const PortSpec* ports[] = {&c.wire, &c.host};
    for (unsigned p = 0; p < 2; ++p) {
      if (!ports[p]->shaper) continue;
      std::vector<uint64_t> floors;
      for (const ClassSpec& cs : port_classes(c, p)) floors.push_back(cs.floor ? bytes_per_sec(cs.floor->rate_bps) : 0);
      if (auto problem = check_floors_fit(bytes_per_sec(ports[p]->shaper->rate_bps), floors))
        return fail(key_path("shaper", p == 0 ? "wire" : "host") + ".rate", *problem);
    }
    return true;
  }

  bool parse_eal(const toml::table& root, ConfigSpec& c) {
    const toml::table* t = table(root, "eal", "", false);
    if (t == nullptr) return !failed();
    if (!check_keys(*t, "eal", {"args"})) return false;
    const toml::node* n = t->get("args");
    if (n == nullptr) return true;
    const toml::array* a = n->as_array();
    if (a == nullptr) return fail("eal.args", "expected an array of strings, got " + describe_typed(*n));
    EalArgReader eal;  // as EAL's getopt reads them: "-h" after --file-prefix is a prefix
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string p = index_path("eal.args", i);
      const auto* s = (*a)[i].as_string();
      if (s == nullptr) return fail(p, "expected a string, got " + describe_typed((*a)[i]));
      const std::string& arg = s->get();
      switch (eal.next(arg)) {
        case EalArgClash::kNone:
          break;
        // psgate pins its threads itself from [lcores]; EAL core options would
        // silently disagree with it, and a service core (-s, -S) is an lcore
        // EAL keeps for its services: psgate's data loop never runs there.
        case EalArgClash::kCores:
          return fail(p, toml_quote(arg) +
                             " is not allowed here: set lcores in [lcores] (EAL's core and service-core "
                             "options -l, -c, -s, -S, --lcores, --main-lcore would disagree with them)");
        // psgate adds its ports' devices itself, after eal.args: EAL takes the
        // first it is given of a name, so one here would silently replace the
        // port's own arguments (and -b could hide the port's device).
        case EalArgClash::kDevices:
          return fail(p, toml_quote(arg) +
                             " is not allowed here: devices go in ports.wire.device and ports.host.device (EAL's "
                             "device options --vdev, -a/--allow, -b/--block would replace or hide them)");
        // EAL prints its usage and ends the process with status 0: a start
        // that serves nothing, reported as a success.
        case EalArgClash::kHelp:
          return fail(p, toml_quote(arg) +
                             " is not allowed here: EAL would print its usage and exit without "
                             "starting (dpdk-testpmd --help lists EAL's options)");
        // EAL stops reading there: psgate's own arguments after eal.args
        // (lcores, devices) would be ignored.
        case EalArgClash::kEndOfOptions:
          return fail(p,
                      "\"--\" is not allowed here: EAL would stop reading its arguments there, and ignore "
                      "the lcores and devices psgate adds after them");
      }
      c.eal_args.push_back(arg);
    }
    // psgate's own arguments follow eal.args: the first (--lcores=...)
    // would be that option's value, and EAL would run on its default cores.
    if (!eal.awaiting_value().empty())
      return fail(index_path("eal.args", a->size() - 1),
                  toml_quote(eal.awaiting_value()) +
                      " needs a value after it: EAL would take the --lcores=... psgate adds after eal.args for it "
                      "(or give it as " +
                      toml_quote(eal.awaiting_value().starts_with("--") ? eal.awaiting_value() + "=VALUE"
                                                                        : eal.awaiting_value() + "VALUE") +
                      ")");
    return true;
  }

  bool parse_port(const toml::table& ports, std::string_view name, PortSpec& port) {
    const std::string path = key_path("ports", name);
    const toml::table* t = table(ports, name, "ports", true);
    if (t == nullptr) return false;
    if (!check_keys(*t, path, {"device", "rx_desc", "tx_desc", "mtu"})) return false;
    const std::string* dev = string(*t, "device", path, true);
    if (dev == nullptr) return false;
    if (dev->empty()) return fail(key_path(path, "device"), "must not be empty");
    // "<name>[,<key>=<value>...]": EAL reads the name up to the first comma,
    // spaces included (" net_null0" is no device it knows).
    const std::string dev_name = dev->substr(0, dev->find(','));
    if (dev_name.empty())
      return fail(key_path(path, "device"), toml_quote(*dev) + " names no device before its first ','");
    if (dev_name.find_first_of(" \t") != std::string::npos || dev->back() == ' ' || dev->back() == '\t')
      return fail(key_path(path, "device"),
                  toml_quote(*dev) + ": a device name holds no spaces (and nothing ends in one)");
    // net_pcap opens its captures as EAL starts, with psgate's stop signals
    // blocked: a FIFO there waits for its other end, and only SIGKILL ended
    // psgate meanwhile.
    if (dev_name.rfind("net_pcap", 0) == 0) {
      for (size_t at = dev->find(','); at != std::string::npos;) {
        const size_t next = dev->find(',', at + 1);
        const std::string arg = dev->substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
        at = next;
        const size_t eq = arg.find('=');
        if (eq == std::string::npos || (arg.substr(0, eq) != "rx_pcap" && arg.substr(0, eq) != "tx_pcap")) continue;
        struct stat st {};
        if (::stat(arg.substr(eq + 1).c_str(), &st) == 0 && S_ISFIFO(st.st_mode))
          return fail(key_path(path, "device"), arg.substr(0, eq) + " " + arg.substr(eq + 1) +
                                                    " is a FIFO: net_pcap would wait for its other end before psgate "
                                                    "could start or stop; give a regular file");
      }
    }
    port.device = *dev;
    for (auto [key, field] : {std::pair{"rx_desc", &port.rx_desc}, {"tx_desc", &port.tx_desc}}) {
      if (!integer(*t, key, path, 64, 16384, *field)) return false;
      if (!is_power_of_two(*field)) {
        return fail(key_path(path, key), std::to_string(*field) + " is not a power of two");
      }
    }
    // 68: the smallest MTU IPv4 allows (RFC 791). The device's own limit is
    // checked when the port is set up (ports.cc).
    return integer(*t, "mtu", path, kMinMtu, kMaxMtu, port.mtu);
  }

  bool parse_ports(const toml::table& root, ConfigSpec& c) {
    const toml::table* t = table(root, "ports", "", true);
    if (t == nullptr) return false;
    if (!check_keys(*t, "ports", {"wire", "host"})) return false;
    if (!parse_port(*t, "wire", c.wire) || !parse_port(*t, "host", c.host)) return false;
    // One device (its name, before any ",args") cannot be both sides.
    auto name = [](const std::string& d) { return d.substr(0, d.find(',')); };
    if (name(c.wire.device) == name(c.host.device))
      return fail("ports.host.device",
                  toml_quote(name(c.host.device)) + " is ports.wire.device too: a bump in the wire needs two devices");
    // A bump in the wire forwards every frame it receives on one port out of
    // the other: a larger MTU on one side would only make frames it cannot send.
    if (c.wire.mtu != c.host.mtu) {
      return fail("ports.host.mtu", std::to_string(c.host.mtu) + " differs from ports.wire.mtu " +
                                        std::to_string(c.wire.mtu) +
                                        ": frames cross from one port to the other, so both must carry the same size");
    }
    return true;
  }

  bool parse_lcores(const toml::table& root, ConfigSpec& c) {
    const toml::table* t = table(root, "lcores", "", true);
    if (t == nullptr) return false;
    if (!check_keys(*t, "lcores", {"main", "data", "mode"})) return false;
    if (!integer(*t, "main", "lcores", 0, kMaxLcore, c.main_lcore)) return false;
    const toml::node* n = t->get("data");
    if (n == nullptr) return fail("lcores.data", "missing (required, e.g. data = [1])");
    const toml::array* a = n->as_array();
    if (a == nullptr) return fail("lcores.data", "expected an array of lcore ids, got " + describe_typed(*n));
    if (a->empty()) return fail("lcores.data", "must list at least one lcore");
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string p = index_path("lcores.data", i);
      const auto* v = (*a)[i].as_integer();
      if (v == nullptr) return fail(p, "expected an integer, got " + describe_typed((*a)[i]));
      if (v->get() < 0 || v->get() > kMaxLcore) {
        return fail(p, std::to_string(v->get()) + " is out of range 0.." + std::to_string(kMaxLcore));
      }
      const auto id = static_cast<unsigned>(v->get());
      // The main lcore may share a data lcore's CPU: it sleeps (eal_args.cc
      // gives it an EAL lcore id of its own).
      if (std::find(c.data_lcores.begin(), c.data_lcores.end(), id) != c.data_lcores.end()) {
        return fail(p, "lcore " + std::to_string(id) + " listed twice");
      }
      c.data_lcores.push_back(id);
    }
    if (const std::string* mode = string(*t, "mode", "lcores")) {
      if (*mode == "pipelined") {
        if (c.data_lcores.size() < 2)
          return fail("lcores.mode", "\"pipelined\" needs 2 or more data lcores (lcores.data lists 1)");
        c.lcore_mode = ConfigSpec::LcoreMode::kPipelined;
      } else if (*mode == "hybrid") {
        if (c.data_lcores.size() < 3)
          return fail("lcores.mode", "\"hybrid\" needs 3 or more data lcores (lcores.data lists " +
                                         std::to_string(c.data_lcores.size()) + ")");
        c.lcore_mode = ConfigSpec::LcoreMode::kHybrid;
      } else if (*mode != "auto") {
        return fail("lcores.mode", toml_quote(*mode) + " is not a mode (auto, pipelined, hybrid)");
      }
    } else if (failed()) {
      return false;
    }
    return true;
  }

  bool parse_shaper(const toml::table& root, ConfigSpec& c) {
    const toml::table* t = table(root, "shaper", "", false);
    if (t == nullptr) return !failed();
    if (!check_keys(*t, "shaper", {"wire", "host"})) return false;
    for (auto [name, port] : {std::pair{"wire", &c.wire}, {"host", &c.host}}) {
      const std::string path = key_path("shaper", name);
      const toml::table* s = table(*t, name, "shaper", false);
      if (s == nullptr) {
        if (failed()) return false;
        continue;
      }
      if (!check_keys(*s, path, {"rate", "burst", "overhead", "headroom"})) return false;
      std::optional<uint64_t> r, b, o, h;
      // Without a rate the port is unshaped; overhead and headroom still
      // apply to a rate set later over the control socket.
      if (!rate(*s, "rate", path, r) || !burst(*s, "burst", path, b)) return false;
      if (r && !b) return fail(key_path(path, "burst"), "missing (required with rate, e.g. burst = \"64KiB\")");
      if (b && !r) return fail(key_path(path, "burst"), "given without rate (set both or neither)");
      if (!quantity(*s, "overhead", path, parse_size_bytes, "24B", o)) return false;
      if (o && *o > kMaxOverheadBytes) {
        return fail(key_path(path, "overhead"), std::to_string(*o) + " bytes is more than 64B");
      }
      // headroom: "25%" of the burst, or a size like "3200B".
      std::optional<uint64_t> h_share;
      if (const auto* hs = s->get("headroom"); hs && hs->is_string() && hs->as_string()->get().ends_with('%')) {
        if (!quantity(*s, "headroom", path, parse_share_permille, "25%", h_share)) return false;
        if (*h_share > 1000) return fail(key_path(path, "headroom"), "a share of the burst is at most 100%");
        // Shares are kept in per mille: one that rounds to 0 would turn the
        // headroom off, which only "0%" (or "0B") should.
        const std::string& text = hs->as_string()->get();
        if (*h_share == 0 && text.find_first_of("123456789") < text.find('%'))
          return fail(key_path(path, "headroom"), toml_quote(text) +
                                                      " rounds to 0 (shares are kept in steps of 0.1%), "
                                                      "which turns the headroom off: write \"0%\" for that");
      } else if (!quantity(*s, "headroom", path, parse_size_bytes, "25%\" or \"3200B", h)) {
        return false;
      }
      if (h && *h > kMaxHeadroomBytes) {
        return fail(key_path(path, "headroom"), std::to_string(*h) + " bytes is more than 64KiB");
      }
      if (r) port->shaper = RateSpec{*r, *b};
      if (o) port->overhead_bytes = static_cast<uint32_t>(*o);
      if (h) {
        port->headroom_bytes = static_cast<uint32_t>(*h);
        port->headroom_permille = 0;
      } else if (h_share) {
        port->headroom_permille = static_cast<uint32_t>(*h_share);
        port->headroom_bytes = 0;
      }
    }
    return true;
  }

  bool parse_classes(const toml::table& root, ConfigSpec& c) {
    const toml::table* t = table(root, "classes", "", false);
    ClassSpec defaults;
    if (t == nullptr) {
      if (failed()) return false;
      c.classes.assign(c.class_count, defaults);
      return true;
    }
    if (!integer(*t, "count", "classes", 2, 64, c.class_count)) return false;
    c.default_class = c.class_count - 1;
    if (!integer(*t, "default", "classes", 1, c.class_count - 1, c.default_class)) return false;
    if (!integer(*t, "depth", "classes", 1, kMaxClassDepth, defaults.depth)) return false;
    if (!integer(*t, "ecn_threshold", "classes", 0, kMaxClassDepth, defaults.ecn_threshold)) return false;
    if (auto p = check_class(defaults)) return fail(key_path("classes", p->key), p->problem);
    c.classes.assign(c.class_count, defaults);
    // The network-control limit: [classes] for both ports, [classes.<port>] over it.
    std::optional<RateSpec> control = c.wire.control;
    if (!control_limit(*t, "classes", control)) return false;
    c.wire.control = control;
    c.host.control = control;
    for (auto [name, port] : {std::pair{"wire", &c.wire}, {"host", &c.host}}) {
      const toml::table* pt = table(*t, name, "classes", false);
      if (pt == nullptr) {
        if (failed()) return false;
        continue;
      }
      const std::string path = key_path("classes", name);
      if (!check_keys(*pt, path, {"control_rate", "control_burst"}) || !control_limit(*pt, path, port->control))
        return false;
    }

    // The remaining keys must be class numbers with a table of overrides.
    const std::initializer_list<std::string_view> scalar_keys = {
        "count", "default", "depth", "ecn_threshold", "control_rate", "control_burst", "wire", "host"};
    const std::string range = "a class number 0.." + std::to_string(c.class_count - 1);
    for (auto&& [k, v] : *t) {
      const std::string_view key = k.str();
      if (std::find(scalar_keys.begin(), scalar_keys.end(), key) != scalar_keys.end()) continue;
      const bool canonical_number = !key.empty() && key.size() <= 3 && std::all_of(key.begin(), key.end(), [](char ch) {
        return ch >= '0' && ch <= '9';
      }) && (key.size() == 1 || key[0] != '0');
      if (!canonical_number) return unknown_key("classes", key, scalar_keys, range);
      const unsigned idx = static_cast<unsigned>(std::stoul(std::string(key)));
      const std::string path = key_path("classes", key);
      if (idx >= c.class_count) {
        return fail(path, "no such class: count = " + std::to_string(c.class_count) + ", so classes are 0.." +
                              std::to_string(c.class_count - 1));
      }
      const toml::table* ct = v.as_table();
      if (ct == nullptr) return fail(path, "expected a table of class settings, got " + describe_typed(v));
      if (!parse_class(*ct, path, c.classes[idx])) return false;
    }
    // [classes.N.<port>]: what differs on one port, over classes.N.
    c.wire.classes = c.classes;
    c.host.classes = c.classes;
    for (auto&& [k, v] : *t) {
      const toml::table* ct = v.as_table();
      if (ct == nullptr || k.str() == "wire" || k.str() == "host") continue;  // checked above
      const unsigned idx = static_cast<unsigned>(std::stoul(std::string(k.str())));
      for (auto [name, port] : {std::pair{"wire", &c.wire}, {"host", &c.host}}) {
        const toml::table* pt = table(*ct, name, key_path("classes", k.str()), false);
        if (pt == nullptr) {
          if (failed()) return false;
          continue;
        }
        const std::string path = key_path(key_path("classes", k.str()), name);
        if (!parse_class_fields(*pt, path, port->classes[idx], false)) return false;
      }
    }
    return true;
  }

  // control_rate (a rate or "off") and control_burst over `out`, what the
  // table inherits: a rate alone keeps the inherited burst, a burst alone
  // changes the inherited rate's.
  bool control_limit(const toml::table& t, const std::string& path, std::optional<RateSpec>& out) {
    const toml::node* r = t.get("control_rate");
    if (r != nullptr && r->is_string() && r->as_string()->get() == "off") {
      if (t.contains("control_burst"))
        return fail(key_path(path, "control_burst"), "given with control_rate = \"off\" (set one or the other)");
      out.reset();
      return true;
    }
    if (!t.contains("control_rate") && t.contains("control_burst") && !out)
      return fail(key_path(path, "control_burst"), "given where control_rate is \"off\" (set a control_rate too)");
    const bool inherited = out.has_value();
    if (!rate_pair(t, "control_rate", "control_burst", path, out)) return false;
    // A rate over "off" takes control_burst's own default, not a policer's.
    if (!inherited && out && !t.contains("control_burst")) out->burst_bytes = kDefaultControlBurstBytes;
    return true;
  }

  bool parse_class(const toml::table& t, const std::string& path, ClassSpec& cs) {
    return parse_class_fields(t, path, cs, true);
  }

  // [classes.N] (class_table: depth too, and the per-port tables) or
  // [classes.N.<port>] (the rest: depth is the class's on both ports).
  bool parse_class_fields(const toml::table& t, const std::string& path, ClassSpec& cs, bool class_table) {
    const bool ok =
        class_table
            ? check_keys(t, path,
                         {"depth", "cap", "cap_burst", "floor", "floor_burst", "ecn_threshold", "dscp", "wire", "host"})
            : check_keys(t, path, {"cap", "cap_burst", "floor", "floor_burst", "ecn_threshold", "dscp"});
    if (!ok) return false;
    if (class_table && !integer(t, "depth", path, 1, kMaxClassDepth, cs.depth)) return false;
    if (!integer(t, "ecn_threshold", path, 0, kMaxClassDepth, cs.ecn_threshold)) return false;
    if (!rate_pair(t, "cap", "cap_burst", path, cs.cap)) return false;
    if (!rate_pair(t, "floor", "floor_burst", path, cs.floor)) return false;
    if (!integer(t, "dscp", path, 0, 63, cs.dscp)) return false;
    // The checks the control socket applies to a class too (check_class).
    if (auto p = check_class(cs)) {
      // Name the key this table set; the other one of a pair was inherited.
      std::string key = p->key;
      if (key == "ecn_threshold" && !t.contains("ecn_threshold") && class_table) key = "depth";
      if (key == "floor" && !t.contains("floor")) key = "cap";
      return fail(key_path(path, key), p->problem);
    }
    return true;
  }

  bool parse_jobs(const toml::table& root, ConfigSpec& c) {
    const toml::node* n = root.get("jobs");
    if (n == nullptr) return true;
    const toml::array* a = n->as_array();
    if (a == nullptr) {
      return fail("jobs", "expected an array of tables ([[jobs]]), got " + describe_typed(*n));
    }
    std::map<uint32_t, size_t> index_of_id;
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string path = index_path("jobs", i);
      const toml::table* t = (*a)[i].as_table();
      if (t == nullptr) return fail(path, "expected a table, got " + describe_typed((*a)[i]));
      if (!check_keys(*t, path, {"id", "name", "rank", "match", "police", "police_burst"})) {
        return false;
      }
      JobSpec job;
      if (!integer(*t, "id", path, 1, std::numeric_limits<uint32_t>::max(), job.id, true)) {
        return false;
      }
      if (auto [it, fresh] = index_of_id.emplace(job.id, i); !fresh) {
        return fail(key_path(path, "id"),
                    "id " + std::to_string(job.id) + " is already used by " + index_path("jobs", it->second));
      }
      const std::string* name = string(*t, "name", path);
      if (failed()) return false;
      job.name = name ? *name : "job-" + std::to_string(job.id);
      // The control protocol's rules too (check_job): the name printable
      // UTF-8 with no bidi controls, at least one rule, the policer's range.
      if (auto p = check_job(job); p && p->key == "name") return fail(key_path(path, "name"), p->problem);
      if (!integer(*t, "rank", path, 0, std::numeric_limits<uint32_t>::max(), job.rank)) {
        return false;
      }
      if (!parse_match_list(*t, path, job)) return false;
      if (!rate_pair(*t, "police", "police_burst", path, job.police)) return false;
      if (auto p = check_job(job)) return fail(key_path(path, p->key), p->problem);
      c.jobs.push_back(std::move(job));
    }
    return true;
  }

  bool parse_match_list(const toml::table& t, const std::string& path, JobSpec& job) {
    const std::string p = key_path(path, "match");
    const toml::node* n = t.get("match");
    if (n == nullptr) {
      return fail(p, "missing (required, e.g. match = [\"dst=10.0.0.5/32,dport=2222,proto=tcp\"])");
    }
    const toml::array* a = n->as_array();
    if (a == nullptr) return fail(p, "expected an array of rule strings, got " + describe_typed(*n));
    if (a->empty()) return fail(p, "must hold at least one rule");
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string rp = index_path(p, i);
      const auto* s = (*a)[i].as_string();
      if (s == nullptr) return fail(rp, "expected a rule string, got " + describe_typed((*a)[i]));
      auto rule = parse_match_rule(s->get());
      if (!rule) return fail(rp, rule.error());
      job.match.push_back(*rule);
    }
    return true;
  }

  bool parse_dataplane(const toml::table& root, ConfigSpec& c) {
    const toml::table* t = table(root, "dataplane", "", false);
    if (t == nullptr) return !failed() && check_max_jobs(c, "dataplane.max_jobs");
    const std::string p = "dataplane";
    if (!check_keys(*t, p,
                    {"burst", "ring_size", "mbufs", "flow_cache", "max_jobs", "drain_timeout", "takeover_hold",
                     "idle_sleep"})) {
      return false;
    }
    const int64_t u32max = std::numeric_limits<uint32_t>::max();
    if (!integer(*t, "burst", p, 1, 64, c.burst)) return false;
    if (!integer(*t, "ring_size", p, 64, 65536, c.ring_size)) return false;
    if (!is_power_of_two(c.ring_size)) {
      return fail("dataplane.ring_size", std::to_string(c.ring_size) + " is not a power of two");
    }
    // "auto" (the default, kAutoMbufs) sizes the pool at start to what the
    // queues and descriptor rings can hold, which depends on keys of other
    // tables and on how many RX queues the lcores make.
    if (const toml::node* n = t->get("mbufs"); n != nullptr && n->is_string()) {
      if (n->as_string()->get() != "auto") {
        return fail("dataplane.mbufs", toml_quote(n->as_string()->get()) + " is not \"auto\" or a number of buffers");
      }
      c.mbufs = kAutoMbufs;
    } else if (n != nullptr && !n->is_integer()) {
      return wrong_type("dataplane.mbufs", *n, "a number of buffers or \"auto\"");
    } else if (!integer(*t, "mbufs", p, kMinMbufs, kMaxMbufs, c.mbufs)) {
      return false;
    }
    if (!integer(*t, "flow_cache", p, 0, u32max, c.flow_cache_entries)) return false;
    // The flow cache's own limits (FlowCache::create), which a start would
    // otherwise be the first to meet.
    if (c.flow_cache_entries != 0 &&
        (c.flow_cache_entries < kMinFlowCacheEntries || c.flow_cache_entries > kMaxFlowCacheEntries)) {
      return fail("dataplane.flow_cache", std::to_string(c.flow_cache_entries) + " is out of range " +
                                              std::to_string(kMinFlowCacheEntries) + ".." +
                                              std::to_string(kMaxFlowCacheEntries) + " (0 turns the cache off)");
    }
    if (!integer(*t, "max_jobs", p, 1, 1048576, c.max_jobs)) return false;
    if (!check_max_jobs(c, "dataplane.max_jobs")) return false;
    if (!duration(*t, "drain_timeout", p, c.drain_timeout_ns) ||
        !duration(*t, "takeover_hold", p, c.takeover_hold_ns) || !duration(*t, "idle_sleep", p, c.idle_sleep_ns))
      return false;
    // A stop waits this long for the queues (and systemd's stop timeout is
    // extended by it): beyond an hour it is a typo, and in TSC ticks it
    // would wrap.
    if (c.drain_timeout_ns > 3'600'000'000'000)
      return fail("dataplane.drain_timeout", "must be at most 3600s (a stop waits this long for the queues)");
    // A hold is a priority inversion for the new job while it lasts.
    if (c.takeover_hold_ns > 1'000'000'000)
      return fail("dataplane.takeover_hold", "must be at most 1s (it holds a new job in the default class)");
    // A sleeping lcore leaves the NIC's descriptor ring to fill: 10 ms at
    // 10 Gbit/s is 12 MB, far past any ring; a sleep under 10 us is spent
    // in the system call (timer slack is 50 us) and saves no CPU.
    if (c.idle_sleep_ns != 0 && (c.idle_sleep_ns < 10'000 || c.idle_sleep_ns > 10'000'000))
      return fail("dataplane.idle_sleep", "must be \"0s\" (busy polling) or 10us to 10ms");
    return true;
  }

  bool check_max_jobs(const ConfigSpec& c, const std::string& path) {
    if (c.jobs.size() > c.max_jobs) {
      return fail(path, std::to_string(c.max_jobs) + " is fewer than the " + std::to_string(c.jobs.size()) +
                            " [[jobs]] configured");
    }
    return true;
  }

  bool parse_stats(const toml::table& root, ConfigSpec& c) {
    const toml::table* t = table(root, "stats", "", false);
    if (t == nullptr) return !failed();
    if (!check_keys(*t, "stats", {"interval"})) return false;
    if (!duration(*t, "interval", "stats", c.stats_interval_ns)) return false;
    // A summary line each interval: shorter than 100 ms floods the journal.
    if (c.stats_interval_ns != 0 && c.stats_interval_ns < 100'000'000)
      return fail("stats.interval", "must be \"0s\" (off) or at least 100ms");
    return true;
  }

  bool parse_log(const toml::table& root, ConfigSpec& c) {
    const toml::table* t = table(root, "log", "", false);
    if (t == nullptr) return !failed();
    if (!check_keys(*t, "log", {"level"})) return false;
    const std::string* level = string(*t, "level", "log");
    if (level == nullptr) return !failed();
    const std::initializer_list<std::string_view> levels = {"trace", "debug",    "info", "warn",
                                                            "error", "critical", "off"};
    if (std::find(levels.begin(), levels.end(), *level) == levels.end()) {
      return fail("log.level", toml_quote(*level) + " is not a level (trace, debug, info, warn, error, critical, off)");
    }
    c.log_level = *level;
    return true;
  }

  bool parse_control(const toml::table& root, ConfigSpec& c) {
    const toml::table* t = table(root, "control", "", false);
    if (t == nullptr) return !failed();
    if (!check_keys(*t, "control", {"socket", "state", "unread_timeout"})) return false;
    if (const std::string* s = string(*t, "socket", "control")) {
      if (s->empty()) return fail("control.socket", "must not be empty");
      if (s->size() > kMaxSocketPathBytes) {
        return fail("control.socket", "path is longer than a unix socket allows (107 bytes)");
      }
      c.control.socket = *s;
    }
    if (failed()) return false;
    if (const std::string* s = string(*t, "state", "control")) {
      // An empty one (a template's unset variable) would run without a state
      // file, losing every socket change at the next restart, unsaid: leave
      // the key out for that. One that ends in "/" names a directory.
      if (s->empty()) return fail("control.state", "must not be empty (leave the key out to run without a state file)");
      if (const std::string name = std::filesystem::path(*s).filename().string();
          name.empty() || name == "." || name == "..")
        return fail("control.state", toml_quote(*s) + " names a directory: it must name a file");
      c.control.state = *s;
    }
    if (failed()) return false;
    if (!duration(*t, "unread_timeout", "control", c.control.unread_timeout_ns)) return false;
    // The stalled-client check runs at the control thread's 100 ms tick, and
    // a fifth of it is the prompt-reader time: under a second a client that
    // reads is dropped for a scheduling hiccup. Over an hour it is a typo
    // (a client that never reads holds its place and memory that long).
    if (c.control.unread_timeout_ns < 1'000'000'000 || c.control.unread_timeout_ns > 3'600'000'000'000)
      return fail("control.unread_timeout", "must be 1s..3600s");
    // One file cannot be both: the socket's start replaces a stale socket
    // there, and the state file is rewritten in place of whatever is there.
    // Compared as the files they name: a relative path is the working
    // directory's, and a directory may be reached through a link.
    auto file_of = [](const std::string& p) {
      std::error_code ec;
      std::filesystem::path abs = std::filesystem::absolute(p, ec);
      if (ec) return std::filesystem::path(p).lexically_normal();
      std::filesystem::path real = std::filesystem::weakly_canonical(abs, ec);
      return ec ? abs.lexically_normal() : real;
    };
    if (!c.control.state.empty() && file_of(c.control.state) == file_of(c.control.socket))
      return fail("control.state", "must not be the control socket's path (" + c.control.socket + ")");
    return !failed();
  }

  bool parse_metrics(const toml::table& root, ConfigSpec& c) {
    const toml::table* t = table(root, "metrics", "", false);
    if (t == nullptr) return !failed();
    if (!check_keys(*t, "metrics", {"listen"})) return false;
    const std::string* listen = string(*t, "listen", "metrics");
    if (listen == nullptr) return !failed();
    auto spec = parse_metrics_listen(*listen);
    if (!spec) return fail("metrics.listen", toml_quote(*listen) + ": " + spec.error());
    c.metrics = std::move(*spec);
    return true;
  }

  // [cluster]: absent means single-host mode. Checked here as far as a file
  // can be: whether the store answers is the gateway's business at start.
  bool parse_cluster(const toml::table& root, ConfigSpec& c) {
    const toml::table* t = table(root, "cluster", "", false);
    if (t == nullptr) return !failed();
    if (!check_keys(*t, "cluster",
                    {"endpoints", "name", "prefix", "address", "ca", "cert", "key", "lease_ttl", "compact_every"}))
      return false;
    ClusterSpec cl;
    const toml::node* n = t->get("endpoints");
    const toml::array* a = n ? n->as_array() : nullptr;
    if (a == nullptr || a->empty()) {
      return fail("cluster.endpoints", n ? "expected a non-empty array of \"http://host:port\" strings"
                                         : "is required (etcd's client URLs, e.g. [\"http://10.0.0.1:2379\"])");
    }
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string p = index_path("cluster.endpoints", i);
      const auto* s = (*a)[i].as_string();
      if (s == nullptr) return fail(p, "expected a string, got " + describe_typed((*a)[i]));
      if (auto problem = endpoint_problem(s->get())) return fail(p, *problem);
      cl.endpoints.push_back(s->get());
    }
    const std::string* name = string(*t, "name", "cluster", true);
    if (name == nullptr) return false;
    if (std::string problem = name_problem(*name); !problem.empty()) return fail("cluster.name", problem);
    // The name is the last part of its registration's key (P/gateways/<name>).
    if (name->find('/') != std::string::npos) return fail("cluster.name", "must not contain '/'");
    cl.name = *name;
    const std::string* prefix = string(*t, "prefix", "cluster", true);
    if (prefix == nullptr) return false;
    if (prefix->size() < 2 || prefix->front() != '/' || prefix->back() == '/')
      return fail("cluster.prefix", toml_quote(*prefix) + " is not a key prefix like \"/psgate/training\"");
    if (std::string problem = name_problem(*prefix); !problem.empty()) return fail("cluster.prefix", problem);
    cl.prefix = *prefix;
    for (auto [key, out] : {std::pair{"address", &cl.address}, {"ca", &cl.ca}, {"cert", &cl.cert}, {"key", &cl.key}})
      if (const std::string* s = string(*t, key, "cluster")) *out = *s;
    if (failed()) return false;
    if (cl.address.empty()) cl.address = cl.name;
    if (cl.cert.empty() != cl.key.empty())
      return fail("cluster.cert", "cert and key go together (set both or neither)");
    const bool tls = std::any_of(cl.endpoints.begin(), cl.endpoints.end(),
                                 [](const std::string& e) { return e.rfind("https://", 0) == 0; });
    if (tls && cl.ca.empty()) return fail("cluster.ca", "is required with https endpoints (the store's CA file)");
    if (!tls && !cl.ca.empty()) return fail("cluster.ca", "is set but no endpoint is https://");
    if (!duration(*t, "lease_ttl", "cluster", cl.lease_ttl_ns)) return false;
    if (cl.lease_ttl_ns < kMinLeaseTtlNs || cl.lease_ttl_ns > kMaxLeaseTtlNs)
      return fail("cluster.lease_ttl", "must be 2s..60s");
    // etcd grants leases in whole seconds: "2500ms" would be granted as 2 s
    // while the leader's step-down margin reckoned with 2.5.
    if (cl.lease_ttl_ns % 1'000'000'000 != 0) return fail("cluster.lease_ttl", "must be whole seconds");
    if (!duration(*t, "compact_every", "cluster", cl.compact_every_ns)) return false;
    if (cl.compact_every_ns != 0 && (cl.compact_every_ns < 1'000'000'000 || cl.compact_every_ns > 86'400'000'000'000))
      return fail("cluster.compact_every", "must be 1s..86400s, or 0s for never (a store its operator compacts)");
    c.cluster = std::move(cl);
    return true;
  }

  // [policy]: the `policy` control command's settings, as it takes them.
  bool parse_policy(const toml::table& root, ConfigSpec& c) {
    const toml::table* t = table(root, "policy", "", false);
    if (t == nullptr) return !failed();
    if (!check_keys(*t, "policy", {"name", "interval", "rotate_on"})) return false;
    const std::string* name = string(*t, "name", "policy", true);
    if (name == nullptr) return false;
    const auto kind = policy_from_name(*name);
    if (!kind) return fail("policy.name", toml_quote(*name) + " is not a policy (" + policy_name_list() + ")");
    c.policy.kind = *kind;
    c.policy.interval_ns = default_policy_interval_ns(*kind);
    if (!duration(*t, "interval", "policy", c.policy.interval_ns)) return false;
    if (!valid_policy_interval_ns(c.policy.interval_ns)) return fail("policy.interval", "must be at least 1ms");
    const std::string* rotate = string(*t, "rotate_on", "policy");
    if (failed()) return false;
    if (rotate != nullptr) {
      const auto on = rotate_on_from_name(*rotate);
      if (!on) return fail("policy.rotate_on", toml_quote(*rotate) + " is not \"time\" or \"iteration\"");
      if (*kind != PolicyKind::kRoundRobin) return fail("policy.rotate_on", "applies to round-robin only");
      c.policy.rotate_on = *on;
    }
    return true;
  }
};

}  // namespace

Result<MetricsSpec> parse_metrics_listen(const std::string& listen) {
  using R = Result<MetricsSpec>;
  MetricsSpec m;
  m.listen = listen;
  if (listen == "off") return m;
  const char* expected = "expected \"off\", IPv4:port (\"127.0.0.1:9467\") or [IPv6]:port (\"[::1]:9467\")";
  // The port follows the last colon; an IPv6 address must be bracketed so
  // that its own colons are not taken for the port's.
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) return R::failure(expected);
  std::string host = listen.substr(0, colon);
  const std::string port = listen.substr(colon + 1);
  int family = AF_INET;
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return R::failure(expected);
    host = host.substr(1, host.size() - 2);
    family = AF_INET6;
  }
  unsigned char addr[sizeof(in6_addr)];
  if (inet_pton(family, host.c_str(), addr) != 1) {
    return R::failure(family == AF_INET6
                          ? "\"" + host + "\" is not an IPv6 address"
                          : "\"" + host + "\" is not an IPv4 address (host names are not resolved; " + expected + ")");
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) < 1 || std::stoul(port) > 65535) {
    return R::failure("port \"" + port + "\" is not 1..65535");
  }
  m.host = host;
  m.port = static_cast<uint16_t>(std::stoul(port));
  return m;
}

Result<ConfigSpec> parse_config(std::string_view toml_text, std::string_view source_name) {
  auto root = parse_toml(toml_text, source_name);
  if (!root) return Result<ConfigSpec>::failure(root.error());
  return Parser(source_name).run(*root);
}

std::string config_read_error(const std::string& path, int err) {
  if (err == EFBIG)
    return path + ": cannot read config: more than " + std::to_string(kMaxConfigFileBytes >> 20) + " MiB";
  return path + ": cannot read config: " + read_text_error(err);  // e.g. EISDIR
}

Result<ConfigSpec> load_config_file(const std::string& path, const std::function<bool()>& give_up) {
  std::string text;
  if (const int err = read_text_file(path, text, kMaxConfigFileBytes, give_up))
    return Result<ConfigSpec>::failure(config_read_error(path, err));
  return parse_config(text, path);
}

const std::vector<ClassSpec>& port_classes(const ConfigSpec& config, unsigned port) {
  const PortSpec& p = port == 0 ? config.wire : config.host;
  return p.classes.size() == config.classes.size() ? p.classes : config.classes;
}

ClusterEndpoint parse_endpoint(std::string_view url) {
  const bool tls = url.rfind("https://", 0) == 0;
  std::string_view rest = url.substr(tls ? 8 : 7);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  return ClusterEndpoint{std::string(rest), tls};
}

std::optional<std::string> endpoint_problem(std::string_view url) {
  const std::string quoted = toml_quote(url);
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    return quoted + " is not an endpoint URL (\"http://host:port\" or \"https://host:port\")";
  const std::string target = parse_endpoint(url).target;
  // user:password@ would be taken for the host and dialled: etcd's
  // credentials are not given in its URL. Said without them (the message
  // goes to the journal).
  if (const size_t at = target.find('@'); at != std::string::npos && target.find('/') > at)
    return toml_quote(std::string(url.substr(0, url.find("://") + 3)) + "..." + target.substr(at)) +
           " holds user information (user@ or user:password@); give scheme://host:port only";
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos || colon == 0) return quoted + " has no host:port (etcd's client port is 2379)";
  const std::string host = target.substr(0, colon), port = target.substr(colon + 1);
  if (host.find_first_of("/?# ") != std::string::npos || target.find('/') != std::string::npos)
    return quoted + " has a path or a bad host; give scheme://host:port only";
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) == 0 || std::stoul(port) > 65535)
    return quoted + " has no valid port (1..65535)";
  return std::nullopt;
}

std::optional<std::string> check_burst_bytes(uint64_t bytes) {
  if (bytes < kMinBurstBytes || bytes > kMaxBurstBytes) {
    return std::to_string(bytes) + " bytes is out of range 64B..512MiB";
  }
  return std::nullopt;
}

std::optional<ValueProblem> check_rate_spec(const RateSpec& r, const std::string& rate_key,
                                            const std::string& burst_key) {
  if (auto p = check_rate_bps(r.rate_bps)) return ValueProblem{rate_key, *p};
  if (auto p = check_burst_bytes(r.burst_bytes)) return ValueProblem{burst_key, *p};
  return std::nullopt;
}

std::optional<ValueProblem> check_class(const ClassSpec& c) {
  if (c.depth < 1 || c.depth > kMaxClassDepth) {
    return ValueProblem{"depth", std::to_string(c.depth) + " is out of range 1.." + std::to_string(kMaxClassDepth)};
  }
  if (c.ecn_threshold != 0 && c.ecn_threshold >= c.depth) {
    return ValueProblem{"ecn_threshold", "ecn_threshold " + std::to_string(c.ecn_threshold) + " must be below depth " +
                                             std::to_string(c.depth) + " (0 turns marking off)"};
  }
  if (c.cap)
    if (auto p = check_rate_spec(*c.cap, "cap", "cap_burst")) return p;
  if (c.floor)
    if (auto p = check_rate_spec(*c.floor, "floor", "floor_burst")) return p;
  // Compared in bytes per second, the unit the classes run in.
  if (c.cap && c.floor && bytes_per_sec(c.floor->rate_bps) > bytes_per_sec(c.cap->rate_bps)) {
    return ValueProblem{
        "floor", "floor " + rate_text_exact(c.floor->rate_bps) + " is above cap " + rate_text_exact(c.cap->rate_bps)};
  }
  if (c.dscp != kNoDscp && (c.dscp < 0 || c.dscp > 63)) {
    return ValueProblem{"dscp", std::to_string(c.dscp) + " is out of range 0..63"};
  }
  return std::nullopt;
}

std::optional<ValueProblem> check_shaper(const RateSpec& r) { return check_rate_spec(r, "rate", "burst"); }

std::optional<std::string> check_floors_fit(uint64_t shaper_bytes_per_sec, const std::vector<uint64_t>& floors) {
  if (shaper_bytes_per_sec == 0) return std::nullopt;
  // Each floor is below 2^61 bytes/s (a rate's bit/s fits 64 bits), so the
  // sum of at most 64 of them cannot wrap.
  unsigned __int128 sum = 0;
  for (uint64_t f : floors) sum += f;
  if (sum < shaper_bytes_per_sec) return std::nullopt;
  // In bits, the sum may pass 64 bits (floors near the largest rate): then
  // in digits, else in the units the file and psgatectl write.
  std::string sum_bits;
  if (sum * 8 <= std::numeric_limits<uint64_t>::max()) {
    sum_bits = rate_text_exact(static_cast<uint64_t>(sum * 8));
  } else {
    for (unsigned __int128 b = sum * 8; sum_bits.empty() || b != 0; b /= 10)
      sum_bits.insert(sum_bits.begin(), static_cast<char>('0' + static_cast<unsigned>(b % 10)));
    sum_bits += " bit/s";
  }
  return "the class floors add up to " + sum_bits + ", at or above the shaper's " +
         rate_text_exact(bits_per_sec(shaper_bytes_per_sec)) +
         ": floors are served first, so a class without one (class 0, network control, among them) would get "
         "nothing";
}

std::optional<ValueProblem> check_job(const JobSpec& j) {
  if (j.id == 0) return ValueProblem{"id", "must be at least 1"};
  // The name rule (text.h): printable UTF-8, no bidi controls.
  if (const std::string problem = name_problem(j.name); !problem.empty()) {
    return ValueProblem{"name", toml_quote(j.name) + " " + problem};
  }
  if (j.match.empty()) return ValueProblem{"match", "must hold at least one rule"};
  if (j.police)
    if (auto p = check_rate_spec(*j.police, "police", "police_burst")) return p;
  return std::nullopt;
}

uint32_t max_frame_bytes(uint32_t mtu, unsigned vlan_tags) { return mtu + 14 + 4 * vlan_tags; }

unsigned class_for_rank(const ConfigSpec& config, uint32_t rank) {
  // Job classes: 1..count-1 in order, skipping the default class. Written
  // to stay in range even for a hand-built spec that skipped validation.
  const unsigned count = std::max(config.class_count, 1u);
  const bool default_in_range = config.default_class >= 1 && config.default_class < count;
  const unsigned job_classes = count - 1 - (default_in_range ? 1 : 0);
  if (job_classes == 0) return config.default_class;
  const unsigned cls = 1 + std::min<uint32_t>(rank, job_classes - 1);
  return default_in_range && cls >= config.default_class ? cls + 1 : cls;
}

}  // namespace psgate
