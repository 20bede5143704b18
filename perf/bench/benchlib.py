# SPDX-License-Identifier: BSD-3-Clause
"""Runners for perf/run-bench: psgate, dpdk-testpmd and psgate-gen as child
processes, their counters sampled while they run, and the machine set-up
(hugepages, CPU description).

Two measurement paths (perf/README.md):
  A  in-process replay: the forwarder's two ports are net_pcap with
     infinite_rx=1 and no TX file (TX frames are freed), so the forwarder's
     data lcore is the only busy thread; throughput comes from its own
     counters, sampled once a second.
  B  psgate-gen over memif: the generator's memif clients face the
     forwarder's memif server ports; throughput is what comes back to the
     generator.

Every sample also reads the data threads' schedstat (time on CPU, time
waiting for a CPU, in ns) so a report can show how much CPU a run actually
got on this shared machine, and throughput per CPU-second.
"""
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import threading
import time

import stages  # noqa: E402  (perf/bench is on the path of every script that imports benchlib)

HUGE_NR = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
MBUF_BYTES = 2176 + 128 + 64  # RTE_MBUF_DEFAULT_BUF_SIZE + mbuf header + mempool object header


class BenchError(Exception):
    pass


def log(msg):
    print(f"[run-bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# ---------------------------------------------------------------- machine


def machine_description():
    d = {"cpus": os.cpu_count()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            v = v.strip()
            if k == "Model name":
                d["cpu_model"] = v
            elif k == "Hypervisor vendor":
                d["hypervisor"] = v
            elif k in ("CPU family", "Model", "Thread(s) per core", "L2 cache", "L3 cache"):
                d[k.lower().replace(" ", "_").replace("(s)", "s")] = v
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            d["mem_total_kb"] = int(f.readline().split()[1])
    except OSError:
        pass
    d["kernel"] = os.uname().release
    try:
        d["dpdk"] = subprocess.run(["pkg-config", "--modversion", "libdpdk"], capture_output=True,
                                   text=True).stdout.strip()
    except OSError:
        pass
    return d


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def other_busy_processes(own_pids):
    """Processes other than ours using CPU right now (a noise indicator)."""
    out = subprocess.run(["ps", "-eo", "pid,pcpu,comm", "--no-headers", "--sort=-pcpu"], capture_output=True,
                         text=True).stdout
    busy = []
    for line in out.splitlines()[:12]:
        pid, pcpu, comm = line.split(None, 2)
        if int(pid) in own_pids or int(pid) == os.getpid():
            continue
        if float(pcpu) >= 20.0:
            busy.append(f"{comm}({pcpu}%)")
    return busy


class Hugepages:
    """Reserves 2 MB hugepages for the run and gives them back at exit."""

    def __init__(self):
        self.orig = None
        self.reserved = 0
        self.mounted = False
        self.mode = "no-huge"
        self.note = ""

    def setup(self, pages, allow=True):
        if not allow:
            self.note = "--no-huge requested"
            return
        try:
            with open(HUGE_NR) as f:
                self.orig = int(f.read())
            free = self._free()
            if free < pages:
                with open(HUGE_NR, "w") as f:
                    f.write(str(self.orig + pages - free))
            if not os.path.ismount("/dev/hugepages"):
                os.makedirs("/dev/hugepages", exist_ok=True)
                r = subprocess.run(["mount", "-t", "hugetlbfs", "nodev", "/dev/hugepages"], capture_output=True,
                                   text=True)
                if r.returncode != 0:
                    raise OSError(r.stderr.strip())
                self.mounted = True
            if self._free() < pages:
                raise OSError(f"only {self._free()} of {pages} pages could be reserved")
            self.reserved = pages
            self.mode = "hugepages-2MB"
            self.note = f"{pages} x 2 MB pages reserved for the run"
        except OSError as e:
            self.note = f"hugepages unavailable ({e}): --no-huge"
            self.restore()
            self.mode = "no-huge"

    @staticmethod
    def _free():
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("HugePages_Free:"):
                    return int(line.split()[1])
        return 0

    def restore(self):
        if self.orig is not None:
            try:
                with open(HUGE_NR, "w") as f:
                    f.write(str(self.orig))
            except OSError:
                pass
        if self.mounted:
            subprocess.run(["umount", "/dev/hugepages"], capture_output=True)
            self.mounted = False

    def eal_mem(self, mb):
        """EAL memory arguments for a process that needs `mb` MB."""
        if self.mode == "no-huge":
            return ["--no-huge", "-m", str(mb)]
        # --huge-unlink: nothing is left in /dev/hugepages if a process dies.
        return ["-m", str(mb), "--huge-unlink"]


# ---------------------------------------------------------------- processes


class Proc:
    """A child process with its output in files; stopped by pid only."""

    registry = []

    def __init__(self, name, argv, workdir, stdout_pipe=False):
        self.name = name
        self.argv = argv
        self.out_path = os.path.join(workdir, name + ".out")
        self.err_path = os.path.join(workdir, name + ".err")
        with open(os.path.join(workdir, name + ".cmd"), "w") as f:
            f.write(" ".join(argv) + "\n")
        self._out = None if stdout_pipe else open(self.out_path, "w")
        self._err = open(self.err_path, "w")
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE if stdout_pipe else self._out, stderr=self._err,
                                  stdin=subprocess.DEVNULL, text=stdout_pipe, bufsize=1 if stdout_pipe else -1)
        self.pid = self.p.pid
        Proc.registry.append(self)

    def alive(self):
        return self.p.poll() is None

    def stop(self, sig=signal.SIGINT, timeout=20.0):
        """Signal, wait; SIGKILL the same pid if it does not exit."""
        if self.p.poll() is None:
            try:
                self.p.send_signal(sig)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                log(f"{self.name} (pid {self.pid}) did not stop in {timeout} s: SIGKILL")
                self.p.kill()
                self.p.wait()
        for f in (self._out, self._err):
            if f:
                f.close()
        if self in Proc.registry:
            Proc.registry.remove(self)
        return self.p.returncode

    def tail_err(self, n=5):
        try:
            with open(self.err_path) as f:
                lines = f.read().splitlines()
            return " | ".join(lines[-n:])
        except OSError:
            return ""

    @classmethod
    def stop_all(cls):
        for p in list(cls.registry):
            p.stop(signal.SIGTERM, timeout=5)


def worker_threads(pid, prefix="rte-worker"):
    """tids of a DPDK process's worker lcore threads."""
    tids = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{t}/comm") as f:
                    if f.read().startswith(prefix):
                        tids.append(int(t))
            except OSError:
                pass
    except OSError:
        pass
    return sorted(tids)


def schedstat(pid, tids):
    """(ns on CPU, ns waiting for a CPU) summed over the threads."""
    run = wait = 0
    for t in tids:
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                a, b, _ = f.read().split()
                run += int(a)
                wait += int(b)
        except (OSError, ValueError):
            pass
    return run, wait


def wait_unix_listening(paths, timeout, proc=None):
    """Waits until abstract or filesystem Unix sockets are listening."""
    want = set(paths)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            return False
        seen = set()
        with open("/proc/net/unix") as f:
            next(f)
            for line in f:
                parts = line.split()
                if len(parts) >= 8 and parts[5] == "01" and parts[3] == "00010000":  # LISTEN
                    name = parts[7]
                    seen.add(name[1:] if name.startswith("@") else name)
        if want <= seen:
            return True
        time.sleep(0.1)
    return False


# ---------------------------------------------------------------- control socket


class Control:
    """One connection to psgate's control socket; JSON lines."""

    def __init__(self, path, timeout=30.0):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""

    def call(self, cmd, **args):
        req = dict(cmd=cmd, **args)
        self.s.sendall((json.dumps(req) + "\n").encode())
        while b"\n" not in self.buf:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise BenchError("control socket closed")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise BenchError(f"control {cmd}: {reply.get('error')}")
        return reply["result"]

    def close(self):
        self.s.close()


def wait_health(sock_path, proc, timeout):
    """Polls health until psgate answers (ACL builds with 100k rules take seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise BenchError(f"{proc.name} exited with {proc.p.returncode}: {proc.tail_err()}")
        try:
            c = Control(sock_path, timeout=5)
            h = c.call("health")
            # Many rule partitions are merged in the background after start:
            # measure the steady state, not the minutes before it.
            rules = h.get("rules", {}) if isinstance(h, dict) else {}
            if rules.get("matched_in", 0) > 5:
                c.close()
                time.sleep(0.5)
                continue
            return c
        except (OSError, BenchError, ValueError):
            time.sleep(0.2)
    raise BenchError(f"{proc.name}: no answer on {sock_path} after {timeout} s")


# ---------------------------------------------------------------- psgate config


def toml_str(s):
    return json.dumps(s)


def psgate_config(eal, wire_dev, host_dev, sock, data_lcores=(1, ), jobs=(), shaper=None, classes_extra="",
                  dataplane=None, stats_interval="0s", main_lcore=0, class_count=8, lcore_mode="auto"):
    """psgate TOML. jobs: dicts id, name, rank, match (list). shaper: {port: (rate, burst, overhead[, headroom])}.
    class_count: classes per port; the last is the default class and class 0 network control's, so
    jobs get classes 1..class_count-2 by rank (the lowest-ranked share the last of them)."""
    # psgate refuses lcores this machine does not have: with more data lcores
    # than CPUs - 1, run them on CPUs 0.. (the sleeping main lcore shares CPU 0).
    if max(data_lcores) >= (os.cpu_count() or 1):
        data_lcores = tuple(range(len(data_lcores)))
    lines = ["[eal]", "args = [" + ", ".join(toml_str(a) for a in eal) + "]", "", "[ports.wire]",
             f"device = {toml_str(wire_dev)}", "[ports.host]", f"device = {toml_str(host_dev)}", "", "[lcores]",
             f"main = {main_lcore}", "data = [" + ", ".join(str(x) for x in data_lcores) + "]"]
    if lcore_mode != "auto":
        lines.append(f"mode = {toml_str(lcore_mode)}")
    lines.append("")
    for port, spec in (shaper or {}).items():
        rate, burst, overhead = spec[:3]
        lines += [f"[shaper.{port}]", f"rate = {toml_str(rate)}", f"burst = {toml_str(burst)}",
                  f"overhead = {toml_str(overhead)}"]
        if len(spec) > 3:  # priority headroom; psgate's default otherwise
            lines += [f"headroom = {toml_str(spec[3])}"]
        lines += [""]
    lines += ["[classes]", f"count = {class_count}", f"default = {class_count - 1}", "depth = 1024", classes_extra, ""]
    if dataplane:
        lines.append("[dataplane]")
        for k, v in dataplane.items():
            lines.append(f"{k} = {toml_str(v) if isinstance(v, str) else v}")
        lines.append("")
    lines += ["[stats]", f"interval = {toml_str(stats_interval)}", "", "[log]", 'level = "info"', "", "[control]",
              f"socket = {toml_str(sock)}", ""]
    for j in jobs:
        lines += ["[[jobs]]", f"id = {j['id']}", f"name = {toml_str(j.get('name', 'job-%d' % j['id']))}",
                  f"rank = {j.get('rank', 0)}"]
        lines.append("match = [" + ", ".join(toml_str(m) for m in j["match"]) + "]")
        if j.get("police"):
            lines.append(f"police = {toml_str(j['police'])}")
        lines.append("")
    return "\n".join(lines)


def job_rules(ps_port, proto="udp"):
    """The two rules of one PS job: its pull (from the PS) and push (to the PS) traffic."""
    return [f"src=10.0.0.5/32,sport={ps_port},proto={proto}", f"dst=10.0.0.5/32,dport={ps_port},proto={proto}"]


def filler_rules(n):
    """n rules no benchmark frame matches (172.16/12 sources), all distinct."""
    out = []
    for i in range(n):
        out.append(f"src=172.{16 + (i >> 16) % 16}.{(i >> 8) & 255}.{i & 255}/32,dport={1000 + i % 50000},proto=udp")
    return out


# ---------------------------------------------------------------- samplers


class Series:
    """(t, packets, bytes_by_port, cpu_run_ns, cpu_wait_ns) samples of a forwarder's TX."""

    def __init__(self):
        self.samples = []

    def add(self, t, tx_pkts, tx_bytes, run, wait, extra=None):
        self.samples.append(dict(t=t, pkts=tx_pkts, bytes=tx_bytes, run=run, wait=wait, extra=extra))

    def summarize(self, warmup_s):
        """Rates over the samples after warmup: per-interval median (wall) and window totals."""
        s = self.samples
        if len(s) < 2:
            return None
        t0 = s[0]["t"] + warmup_s
        w = [x for x in s if x["t"] >= t0 - 1e-3]
        if len(w) < 2:
            w = s[-2:]
        per = []
        for a, b in zip(w, w[1:]):
            dt = b["t"] - a["t"]
            if dt > 0:
                per.append((b["pkts"] - a["pkts"]) / dt)
        a, b = w[0], w[-1]
        dt = b["t"] - a["t"]
        dp = b["pkts"] - a["pkts"]
        db = [y - x for x, y in zip(a["bytes"], b["bytes"])]
        drun = b["run"] - a["run"]
        dwait = b["wait"] - a["wait"]
        return {
            "window_s": dt,
            "intervals": len(per),
            "mpps": dp / dt / 1e6,  # window mean, wall clock
            "mpps_median_interval": statistics.median(per) / 1e6 if per else None,
            "mpps_max_interval": max(per) / 1e6 if per else None,
            "gbps": sum(db) * 8 / dt / 1e9,  # frame bytes without FCS
            "port_bps": [x * 8 / dt for x in db],
            "cpu_share": drun / 1e9 / dt,  # of the data thread(s): 1.0 = one CPU all the time
            "cpu_wait_share": dwait / 1e9 / dt,
            "mpps_per_cpu": (dp / (drun / 1e9) / 1e6) if drun > 0 else None,  # packets per CPU-second
        }


def psgate_sample(ctl, proc, tids):
    st = ctl.call("stats")
    t = time.monotonic()
    run, wait = schedstat(proc.pid, tids)
    ports = st["ports"]
    pk = ports["wire"]["tx_packets"] + ports["host"]["tx_packets"]
    by = [ports["wire"]["tx_bytes"], ports["host"]["tx_bytes"]]
    return t, pk, by, run, wait, st


class TestpmdReader(threading.Thread):
    """Parses testpmd's --stats-period blocks from its stdout as they come."""

    rx_re = re.compile(r"RX-packets:\s*(\d+)\s+RX-missed:\s*(\d+)\s+RX-bytes:\s*(\d+)")
    tx_re = re.compile(r"TX-packets:\s*(\d+)\s+TX-errors:\s*(\d+)\s+TX-bytes:\s*(\d+)")
    port_re = re.compile(r"NIC statistics for port (\d+)")

    def __init__(self, proc, nports, log_path):
        super().__init__(daemon=True)
        self.proc = proc
        self.nports = nports
        self.series = Series()
        self.tids = []
        self.log = open(log_path, "w")
        self.started = threading.Event()

    def run(self):
        port = None
        cur = {}
        for line in self.proc.p.stdout:
            self.log.write(line)
            if "Port statistics" in line or "start packet forwarding" in line:
                self.started.set()
            m = self.port_re.search(line)
            if m:
                port = int(m.group(1))
                continue
            m = self.tx_re.search(line)
            if m and port is not None:
                cur[port] = (int(m.group(1)), int(m.group(3)))
                if len(cur) == self.nports and port == self.nports - 1:
                    t = time.monotonic()
                    if not self.tids:
                        self.tids = worker_threads(self.proc.pid)
                    run, wait = schedstat(self.proc.pid, self.tids)
                    self.series.add(t, sum(v[0] for v in cur.values()), [cur[p][1] for p in sorted(cur)], run, wait)
                    cur = {}
        self.log.close()


# ---------------------------------------------------------------- profiles


def perf_usable():
    """Software-clock sampling works in this VM even without hardware counters."""
    try:
        r = subprocess.run(["perf", "record", "-e", "cpu-clock", "-o", "/dev/null", "--", "true"],
                           capture_output=True, text=True, timeout=20)
        return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def start_profile(d, tids, secs, after=0.0):
    """perf record (cpu-clock samples) of the data threads for `secs` s, after `after` s."""
    if not tids:
        return None
    # perf records the threads while its workload (sleep) runs.
    argv = ["perf", "record", "-q", "-e", "cpu-clock", "-F", "2999", "-t", ",".join(str(t) for t in tids), "-o",
            os.path.join(d, "perf.data"), "--", "sleep", str(secs)]
    if after:
        time.sleep(after)
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "perf.err"), "w"))


def finish_profile(d, p, top=20):
    """Top symbols and per-object shares of the samples. Functions of stripped objects
    (Debian's DPDK PMDs keep no static symbols) are summed per object."""
    if p is None:
        return None
    p.wait()
    data = os.path.join(d, "perf.data")
    out = subprocess.run(["perf", "report", "--stdio", "--no-children", "--sort", "dso,symbol", "-i", data],
                         capture_output=True, text=True).stdout
    with open(os.path.join(d, "perf-report.txt"), "w") as f:
        f.write(out)
    syms = {}
    dsos = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[.\]\s+(.*?)[\s-]*$", line)
        if not m:
            continue
        pct, dso, sym = float(m.group(1)), m.group(2), m.group(3).strip()
        dsos[dso] = dsos.get(dso, 0.0) + pct
        if re.match(r"^0x[0-9a-f]+$", sym):
            sym = "(stripped: all its functions)"
        key = (dso, sym)
        syms[key] = syms.get(key, 0.0) + pct
    rows = [{"pct": v, "dso": k[0], "symbol": k[1]} for k, v in sorted(syms.items(), key=lambda kv: -kv[1])]
    # Every row, put into stages (stages.py): the budget's shares, to be turned
    # into cycles once the run's packets per CPU-second are known.
    return {"symbols": rows[:top], "objects": {k: v for k, v in sorted(dsos.items(), key=lambda kv: -kv[1])},
            "stages": stages.budget(rows, None)}


# ---------------------------------------------------------------- the runners


class Env:
    def __init__(self, bins, workdir, huge, quick):
        """bins: {"psgate", "psgatectl", "psgate-gen": path} (locate.binaries)."""
        self.workdir = workdir
        self.huge = huge
        self.quick = quick
        self.psgate = bins["psgate"]
        self.psgatectl = bins["psgatectl"]
        self.gen = bins["psgate-gen"]
        self.testpmd = "/usr/bin/dpdk-testpmd"
        self.seq = 0
        self.cpus = os.cpu_count() or 1

    def rundir(self, tag):
        self.seq += 1
        d = os.path.join(self.workdir, "runs", f"{self.seq:03d}-{tag}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        return d

    def prefix(self, what):
        return f"h9b-{os.getpid()}-{self.seq}-{what}"


def mem_mb_for(mbufs, extra_mb=0):
    return int(256 + mbufs * MBUF_BYTES / (1 << 20) + extra_mb)


def pcap_rx_device(name, pcap, queues=1):
    """A net_pcap replay port with `queues` RX queues, each replaying its own copy of `pcap`
    (net_pcap makes one RX queue per rx_pcap argument; with no tx_pcap it drops what is
    sent, on as many TX queues)."""
    return name + "".join(f",rx_pcap={pcap}" for _ in range(queues)) + ",infinite_rx=1"


LCORE_MODES = ("auto", "pipelined", "hybrid")


def lcore_mode_applies(data_lcores, lcore_mode):
    """Whether psgate takes lcores.mode = `lcore_mode` with that many data lcores."""
    return lcore_mode == "auto" or (lcore_mode == "pipelined" and data_lcores >= 2) or \
        (lcore_mode == "hybrid" and data_lcores >= 3)


def psgate_rx_queues(data_lcores, lcore_mode="auto"):
    """RX queues per port psgate asks for with that many data lcores: one up to 2 data
    lcores (run-to-completion: one lcore both directions, two a direction each, or 1 RX +
    1 scheduler pipelined), n - 2 RX lcores + 2 schedulers from 3, and n - 1 hybrid (the
    two lcores a direction each take queue 0, the n - 2 RX lcores 1..n-2)
    (src/dataplane/dataplane.cc)."""
    if lcore_mode == "hybrid" and data_lcores >= 3:
        return data_lcores - 1
    return 1 if data_lcores <= 2 else data_lcores - 2


def parse_cores(text, avail, option="--cores"):
    """`option` LIST -> data-lcore counts, sorted, each once; empty: 1..min(CPUs, 8).
    Raises ValueError naming the option."""
    if not text:
        return list(range(1, min(len(avail), 8) + 1))
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{option} {text!r}: expected a list of counts such as 1,2,4,8")
    if not counts or min(counts) < 1:
        raise ValueError(f"{option} {text!r}: counts must be 1 or more")
    return sorted(set(counts))


def scaling_cpus(k, avail):
    """(main CPU, data CPUs) for k data lcores on the CPUs this process may run on, or None
    when there are fewer than k. With a CPU to spare the main lcore (it sleeps) gets its own;
    with exactly k it shares the first data lcore's CPU, as on a 2-CPU machine."""
    if k > len(avail):
        return None
    if k < len(avail):
        return avail[0], avail[1:k + 1]
    return avail[0], avail[:k]


def psgate_mode(data_lcores, lcore_mode="auto"):
    """How psgate runs with that many data lcores (and lcores.mode), in words."""
    if data_lcores == 1:
        return "run-to-completion"
    if lcore_mode == "hybrid" and data_lcores >= 3:
        return f"hybrid: 2 a direction each + {data_lcores - 2} RX"
    if data_lcores == 2:
        if lcore_mode == "pipelined":
            return "pipelined: 1 RX + 1 scheduler"
        return "run-to-completion, a direction each"
    return f"pipelined: {psgate_rx_queues(data_lcores)} RX + 2 schedulers"


def run_psgate_pcap(env, tag, wire_pcap, host_pcap, cap_packets, warmup, window, jobs, data_lcores=(1, ),
                    shaper=None, classes_extra="", flow_cache=None, max_jobs=None, extra_mb=0, on_ready=None,
                    profile_s=None, main_lcore=0, class_count=8, lcore_mode="auto"):
    """Path A with psgate. Returns a result dict. With more than one RX queue per port (from
    4 data lcores, 3 hybrid), each port gets one replay queue per RX queue psgate asks for.
    lcore_mode: lcores.mode (auto, pipelined, hybrid)."""
    d = env.rundir(tag)
    sock = os.path.join(d, "psgate.sock")
    rxq = psgate_rx_queues(len(data_lcores), lcore_mode)
    # The replay copies of both ports (one per RX queue), plus queues and descriptor rings.
    mbufs = 2 * rxq * cap_packets + 32768
    dp = {"mbufs": mbufs}
    if flow_cache is not None:
        dp["flow_cache"] = flow_cache
        extra_mb += flow_cache * 160 // (1 << 20) * max(1, len(data_lcores) - 1)
    if max_jobs is not None:
        dp["max_jobs"] = max_jobs
    eal = env.huge.eal_mem(mem_mb_for(mbufs, extra_mb)) + ["--no-pci", f"--file-prefix={env.prefix('psg')}",
                                                            "--log-level=4"]
    cfg = psgate_config(eal, pcap_rx_device("net_pcap0", wire_pcap, rxq), pcap_rx_device("net_pcap1", host_pcap, rxq),
                        sock, data_lcores, jobs, shaper, classes_extra, dp, main_lcore=main_lcore,
                        class_count=class_count, lcore_mode=lcore_mode)
    cfg_path = os.path.join(d, "psgate.toml")
    with open(cfg_path, "w") as f:
        f.write(cfg)
    stats_json = os.path.join(d, "psgate-stats.json")
    t_start = time.monotonic()
    p = Proc("psgate", [env.psgate, "--config", cfg_path, "--stats-json", stats_json], d)
    res = {"app": "psgate", "tag": tag, "dir": d, "data_lcores": len(data_lcores), "cpus_used": list(data_lcores),
           "mode": psgate_mode(len(data_lcores), lcore_mode), "lcore_mode": lcore_mode, "rx_queues": rxq}
    try:
        ctl = wait_health(sock, p, timeout=180)
        res["ready_s"] = time.monotonic() - t_start
        tids = worker_threads(p.pid)
        res["data_threads"] = len(tids)
        if on_ready:
            on_ready(ctl)
        prof = start_profile(d, tids, profile_s, after=warmup) if profile_s else None
        series = Series()
        n = int(round(warmup + window)) + 1
        t_first = None
        for i in range(n):
            t, pk, by, run, wait, st = psgate_sample(ctl, p, tids)
            t_first = t_first or t
            series.add(t, pk, by, run, wait, st)
            nxt = t_first + i + 1
            if i < n - 1:
                time.sleep(max(0.0, nxt - time.monotonic()))
        res.update(series.summarize(warmup) or {})
        res["last_stats"] = series.samples[-1]["extra"]
        res["first_window_stats"] = next((x["extra"] for x in series.samples if x["t"] >= t_first + warmup - 1e-3),
                                         None)
        res["window_t"] = [series.samples[0]["t"], series.samples[-1]["t"]]
        if prof is not None:
            res["profile"] = finish_profile(d, prof)
        ctl.close()
    finally:
        rc = p.stop()
    res["exit"] = rc
    if rc != 0:
        res["error"] = f"psgate exited {rc}: {p.tail_err()}"
    try:
        with open(stats_json) as f:
            res["conserved"] = json.load(f)["totals"]["conserved"]
    except (OSError, ValueError, KeyError):
        pass
    return res


def run_testpmd_pcap(env, tag, wire_pcap, host_pcap, cap_packets, warmup, window, nb_cores=1, profile_s=None,
                     cpus=None):
    """Path A with testpmd io on the same two net_pcap ports. cpus: the CPU of the main lcore,
    then one per forwarding core (default 0, 1, 2, ... modulo the CPU count). testpmd's io
    streams are (port, RX queue) pairs, so from 3 cores each port gets ceil(cores / 2) replay
    queues: every core has a stream to forward."""
    d = env.rundir(tag)
    queues = max(1, (nb_cores + 1) // 2)
    mbufs = 2 * queues * cap_packets + 32768
    cpus = cpus or [i % env.cpus for i in range(nb_cores + 1)]
    lcores = ",".join(f"{i}@{c}" for i, c in enumerate(cpus[:nb_cores + 1]))
    argv = ["stdbuf", "-oL", env.testpmd, f"--lcores={lcores}", "--main-lcore=0"] + env.huge.eal_mem(
        mem_mb_for(mbufs)) + [
            "--no-pci", f"--file-prefix={env.prefix('tp')}", "--log-level=4",
            "--vdev=" + pcap_rx_device("net_pcap0", wire_pcap, queues),
            "--vdev=" + pcap_rx_device("net_pcap1", host_pcap, queues), "--", "--forward-mode=io",
            f"--nb-cores={nb_cores}", "--stats-period=1", f"--total-num-mbufs={mbufs}", "--burst=32",
            "--no-lsc-interrupt"
        ] + ([f"--rxq={queues}", f"--txq={queues}"] if queues > 1 else [])
    return _run_testpmd(env, d, tag, argv, warmup, window, nb_cores, profile_s)


def _run_testpmd(env, d, tag, argv, warmup, window, nb_cores, profile_s=None):
    p = Proc("testpmd", argv, d, stdout_pipe=True)
    reader = TestpmdReader(p, 2, os.path.join(d, "testpmd.out"))
    reader.start()
    res = {"app": "testpmd", "tag": tag, "dir": d, "data_lcores": nb_cores}
    try:
        deadline = time.monotonic() + 120
        while len(reader.series.samples) < 1 and time.monotonic() < deadline and p.alive():
            time.sleep(0.1)
        if not p.alive():
            raise BenchError(f"testpmd exited {p.p.returncode}: {p.tail_err()}")
        n = int(round(warmup + window)) + 1
        prof = None
        if profile_s:
            while not reader.tids and time.monotonic() < deadline and p.alive():
                time.sleep(0.1)
            prof = start_profile(d, reader.tids, profile_s, after=warmup)
        while len(reader.series.samples) < n + 1 and time.monotonic() < deadline and p.alive():
            time.sleep(0.1)
        # The first block is printed before forwarding starts: drop it.
        s = Series()
        s.samples = reader.series.samples[1:]
        res.update(s.summarize(warmup) or {})
        res["data_threads"] = len(reader.tids)
        if prof is not None:
            res["profile"] = finish_profile(d, prof)
    finally:
        rc = p.stop()
        reader.join(5)
    res["exit"] = rc
    return res


# ---------------------------------------------------------------- path B: psgate-gen over memif


GEN_PROG = re.compile(r"^\s*([\d.]+)s\s+tx\s+([\d.]+)\s+(\w*pps)\s+.*?rx\s+([\d.]+)\s+(\w*pps)")
_UNIT = {"pps": 1, "kpps": 1e3, "Mpps": 1e6, "Gpps": 1e9}


def gen_progress(err_path):
    """Per-second (t, tx_pps, rx_pps) from psgate-gen's progress lines."""
    out = []
    try:
        with open(err_path) as f:
            for line in f:
                m = GEN_PROG.match(line)
                if m:
                    out.append((float(m.group(1)), float(m.group(2)) * _UNIT.get(m.group(3), 1),
                                float(m.group(4)) * _UNIT.get(m.group(5), 1)))
    except OSError:
        pass
    return out


def gen_profile(jobs, duration, drain="500ms"):
    """jobs: dicts with id, name, ps, size, rate, direction, workers, flows, proto."""
    lines = ["[generator]", f'duration = "{duration}s"', f'drain = "{drain}"', 'interval = "1s"',
             'host_port = "net_memif0"', 'wire_port = "net_memif1"', ""]
    for j in jobs:
        lines.append("[[jobs]]")
        for k, v in j.items():
            lines.append(f"{k} = {toml_str(v) if isinstance(v, str) else v}")
        lines.append("")
    return "\n".join(lines)


def run_memif(env, tag, app, gen_jobs, duration, psgate_jobs=(), shaper=None, classes_extra="", data_lcores=(1, ),
              during=None, warmup=1.0, dataplane=None):
    """Path B: start the forwarder (psgate or testpmd) with memif servers, then psgate-gen
    (memif clients) for `duration` s; stop the forwarder first, then the generator (see
    perf/gen/README.md, --hold). `during(ctl)` runs while traffic flows (psgate only)."""
    d = env.rundir(tag)
    wire_sock = os.path.join(d, "wire.memif")
    host_sock = os.path.join(d, "host.memif")
    res = {"app": app, "tag": tag, "dir": d, "data_lcores": len(data_lcores)}
    ctl = None
    if app == "psgate":
        sock = os.path.join(d, "psgate.sock")
        eal = env.huge.eal_mem(512) + ["--no-pci", f"--file-prefix={env.prefix('psg')}", "--log-level=4"]
        cfg = psgate_config(eal, f"net_memif0,role=server,socket={wire_sock}",
                            f"net_memif1,role=server,socket={host_sock}", sock, data_lcores, psgate_jobs, shaper,
                            classes_extra, dataplane)
        cfg_path = os.path.join(d, "psgate.toml")
        with open(cfg_path, "w") as f:
            f.write(cfg)
        fwd = Proc("psgate", [env.psgate, "--config", cfg_path, "--stats-json", os.path.join(d, "psgate-stats.json")],
                   d)
        ctl = wait_health(sock, fwd, timeout=120)
        reader = None
    else:
        lcores = "0@0," + ",".join(f"{i}@{i % env.cpus}" for i in range(1, len(data_lcores) + 1))
        argv = ["stdbuf", "-oL", env.testpmd, f"--lcores={lcores}", "--main-lcore=0"] + env.huge.eal_mem(512) + [
            "--no-pci", f"--file-prefix={env.prefix('tp')}", "--log-level=4",
            f"--vdev=net_memif0,role=server,socket={wire_sock}", f"--vdev=net_memif1,role=server,socket={host_sock}",
            "--", "--forward-mode=io", f"--nb-cores={len(data_lcores)}", "--stats-period=1", "--burst=32",
            "--no-lsc-interrupt"
        ]
        fwd = Proc("testpmd", argv, d, stdout_pipe=True)
        reader = TestpmdReader(fwd, 2, os.path.join(d, "testpmd.out"))
        reader.start()
    gen = None
    try:
        if not wait_unix_listening([wire_sock, host_sock], 60, fwd):
            raise BenchError(f"{app}: memif sockets not listening: {fwd.tail_err()}")
        prof = os.path.join(d, "gen.toml")
        with open(prof, "w") as f:
            f.write(gen_profile(gen_jobs, duration))
        gen_json = os.path.join(d, "gen.json")
        # Generator: main lcore (sleeps) on the forwarder's CPU, worker on CPU 0.
        gen = Proc("gen", [
            env.gen, "--profile", prof, "--json", gen_json, "--hold", "--quiet", "--", *env.huge.eal_mem(512),
            "--no-pci", f"--file-prefix={env.prefix('gen')}", "--log-level=4", f"--lcores=0@{1 % env.cpus},1@0",
            f"--vdev=net_memif0,role=client,socket={host_sock}", f"--vdev=net_memif1,role=client,socket={wire_sock}"
        ], d)
        tids = worker_threads(fwd.pid)
        t0 = time.monotonic()
        gen_cpu0 = None
        psg_series = Series()
        if during is not None and ctl is not None:
            # let the links come up and traffic flow
            time.sleep(warmup + 1.0)
            res["during"] = during(ctl, duration - warmup - 1.5)
        deadline = t0 + duration + 40
        while not os.path.exists(gen_json) and time.monotonic() < deadline:
            if not gen.alive():
                break
            if gen_cpu0 is None and time.monotonic() - t0 > warmup + 0.5:
                gen_tids = worker_threads(gen.pid)
                gen_cpu0 = (time.monotonic(), schedstat(gen.pid, gen_tids))
            if ctl is not None and during is None:
                try:
                    t, pk, by, run, wait, _ = psgate_sample(ctl, fwd, tids)
                except (OSError, BenchError, ValueError) as e:
                    if not gen.alive():
                        break  # the generator died (its memif went with it): reported below
                    fwd.p.wait(5)
                    raise BenchError(f"psgate stopped answering during the run (exit status {fwd.p.poll()}): {e}")
                psg_series.add(t, pk, by, run, wait)
                time.sleep(1.0)
            else:
                time.sleep(0.2)
        if gen_cpu0 is not None:
            run, wait = schedstat(gen.pid, gen_tids)
            dt = time.monotonic() - gen_cpu0[0]
            res["gen_cpu_share"] = (run - gen_cpu0[1][0]) / 1e9 / dt
            res["gen_cpu_wait_share"] = (wait - gen_cpu0[1][1]) / 1e9 / dt
        if not os.path.exists(gen_json):
            raise BenchError(f"psgate-gen wrote no JSON (exit {gen.p.poll()}): {gen.tail_err()}")
        with open(gen_json) as f:
            res["gen"] = json.load(f)
        # Frames of another psgate-gen run (two generators wired together, a stale one still
        # sending into these sockets) count in none of this run's flows, but what came back
        # would then not be what the forwarder carried: the run is refused, not reported.
        other = (res["gen"].get("generator") or {}).get("rx_other_run", 0)
        if other:
            raise BenchError(f"{other} frames of another psgate-gen run arrived on the generator's ports: "
                             f"this run's figures would not be {app}'s alone")
        if psg_series.samples:
            res["psgate_side"] = psg_series.summarize(warmup + 1)
        if reader is not None:
            s = Series()
            s.samples = reader.series.samples[1:]
            res["testpmd_side"] = s.summarize(warmup + 1)
        if ctl is not None:
            # psgate-gen writes its JSON first and, with --hold, keeps its ports started
            # until signalled (perf/gen/main.cc, since 29b319d): the memif link is still up
            # here, so psgate's counters can be read after the drain and cover the whole run.
            # Then psgate is stopped before the generator (finally:), because DPDK 22.11's
            # memif server can crash in rx_burst when its client disconnects while it polls.
            try:
                res["psgate_stats"] = ctl.call("stats")
            except (OSError, BenchError, ValueError) as e:
                fwd.p.wait(5)
                raise BenchError(f"psgate stopped answering after psgate-gen's report, with the memif link still "
                                 f"up (exit status {fwd.p.poll()}): {e}: {fwd.tail_err()}")
    finally:
        if ctl is not None:
            ctl.close()
        res["exit"] = fwd.stop()  # the forwarder first: memif server must not poll while its client goes
        if reader is not None:
            reader.join(5)
        if gen is not None:
            res["gen_exit"] = gen.stop()
    prog = gen_progress(os.path.join(d, "gen.err"))
    res["gen_progress"] = prog
    steady = [r for (t, tx, r) in prog if t > warmup + 0.5 and t <= duration + 0.01]
    steady_tx = [tx for (t, tx, r) in prog if t > warmup + 0.5 and t <= duration + 0.01]
    res["rx_mpps"] = median(steady) / 1e6 if steady else None
    res["tx_mpps"] = median(steady_tx) / 1e6 if steady_tx else None
    tot = res["gen"]["jobs"]
    rxb = sum(j["total"]["rx_bytes"] for j in tot)
    rxs = max(j["total"]["rx_seconds"] for j in tot) or 1
    res["rx_gbps_mean"] = rxb * 8 / rxs / 1e9
    if res["rx_mpps"] is not None and rxb:
        avg_len = rxb / max(1, sum(j["total"]["rx_packets"] for j in tot))
        res["rx_gbps"] = res["rx_mpps"] * 1e6 * avg_len * 8 / 1e9
    # What the generator sent, next to what came back: at rate max, whichever of the two
    # (generator, forwarder) is slower sets the figure. A forwarder that cannot keep up
    # shows as frames a full memif TX ring refused (tx_dropped) or as lost frames.
    txp = sum(j["total"]["tx_packets"] for j in tot)
    txb = sum(j["total"]["tx_bytes"] for j in tot)
    res["tx_packets"] = txp
    res["tx_dropped"] = sum(j["total"].get("tx_dropped", 0) for j in tot)
    if res["gen"].get("generator_side"):  # newer psgate-gens: loss that may be the generator's own RX
        res["generator_side"] = res["gen"]["generator_side"]
    tx_s = (res["gen"].get("generator") or {}).get("tx_seconds")
    if tx_s:
        res["tx_gbps_mean"] = txb * 8 / tx_s / 1e9
    if res["tx_mpps"] is not None and txp:
        res["tx_gbps"] = res["tx_mpps"] * 1e6 * (txb / txp) * 8 / 1e9
    res["lost"] = sum(j["total"]["lost"] for j in tot)
    res["reordered"] = sum(j["total"]["reordered"] for j in tot)
    return res
