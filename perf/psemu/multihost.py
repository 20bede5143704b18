# SPDX-License-Identifier: BSD-3-Clause
"""psemu across several PS hosts: per-host (local) orders against one cluster order.

  perf/psemu/run --ps-hosts 2                  # every policy, default scenario
  perf/psemu/run --ps-hosts 2 --test           # the suite's test (2 jobs x 2 workers)
  perf/psemu/run --ps-hosts 3 --scale big      # more jobs and workers: needs more cores

Topology (fresh for every policy, removed on every exit path):

  netns <p>-ps0  10.77.0.5 ── veth ── gwps0 [psgate gw0] gwwk0 ── veth ── wk0 ┐
  netns <p>-ps1  10.77.1.5 ── veth ── gwps1 [psgate gw1] gwwk1 ── veth ── wk1 ┤ netns <p>-wk
  ...                              netns <p>-gw: every psgate,               ┘ workers 10.77.k.10..
                                   and (cluster-*) etcd on 127.0.0.11-13

One subnet per PS host (10.77.k.0/24); the workers' namespace has one veth
per host. Every job has one PS shard per host (psemu ps per host, listening
on base-port + j), a worker pushes each shard its share of M and its
iteration ends when the last shard's pull has arrived. Each psgate shapes
its host's egress (the pulls) to --rate and classifies job j by its port.

The gateways and etcd share the gateway namespace: etcd listens on that
namespace's loopback, which psgate's control thread reaches (psgate runs in
that namespace; the root namespace is left alone). Everything the script
starts is stopped and the namespaces and etcd's data (on /dev/shm) removed
on every exit path.

Policies (one run each, same scenario):
  fifo             every gateway alone, policy fifo
  local-one        every gateway alone, tensorlights-one, host k's operator order
                   rotated by k (hosts put different jobs on top)
  local-progress   every gateway alone, progress, rotated orders; progress is
                   reported to every gateway
  cluster-one      cluster mode, tensorlights-one computed once by the leader
  cluster-progress cluster mode, progress (reported through gateway 0 only)
  cluster-static   cluster mode, static, order 1..n
"""

import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_run():
    """The single-host driver's helpers (Testbed, locking, psgate settings)."""
    loader = importlib.machinery.SourceFileLoader("psemu_run", os.path.join(HERE, "run"))
    spec = importlib.util.spec_from_loader("psemu_run", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


R = _load_run()
Fail, log, sh, wait_for, pct, parse_size = R.Fail, R.log, R.sh, R.wait_for, R.pct, R.parse_size

POLICIES = ["fifo", "local-one", "local-progress", "cluster-one", "cluster-progress", "cluster-static"]
# psgate policy behind each name, and whether the gateways run in cluster mode.
POLICY_OF = {"fifo": ("fifo", False), "local-one": ("tensorlights-one", False),
             "local-progress": ("progress", False), "cluster-one": ("tensorlights-one", True),
             "cluster-progress": ("progress", True), "cluster-static": ("static", True)}

SCALES = {
    # 2 cores: every psgate's data lcore busy-polls, so H gateways share one CPU.
    "default": dict(jobs=4, workers=3, bytes="2MiB", iters=12, compute_ms=20, rate="100Mbit/s", floor="5Mbit/s"),
    # A bigger machine (one CPU per gateway data lcore, --data-lcores 2,3,...).
    "big": dict(jobs=8, workers=8, bytes="4MiB", iters=30, compute_ms=20, rate="1Gbit/s", floor="10Mbit/s"),
    "test": dict(jobs=2, workers=2, bytes="1MiB", iters=4, compute_ms=10, rate="40Mbit/s", floor="2Mbit/s"),
}

ETCD_MEMBERS = [("m1", "127.0.0.11"), ("m2", "127.0.0.12"), ("m3", "127.0.0.13")]
ETCD_CLIENT, ETCD_PEER = 23790, 23800


def ps_addr(k):
    return f"10.77.{k}.5"


def worker_addr(k, i):
    return f"10.77.{k}.{10 + i}"


def shard_bytes(m, hosts, k):
    """psemu's shard_bytes (runtime.h): M / H, the remainder to the first hosts."""
    return m // hosts + (1 if k < m % hosts else 0)


# ---------------------------------------------------------------------------
# Testbed


def etcd_dir(prefix):
    """etcd's data, in memory: one directory per namespace prefix. Runs with a
    prefix are serialised (take_lock), so a fixed name is safe, and a killed
    run's is found and removed by the next one (MultiTestbed.remove_stale)."""
    # A dot, not a dash: never one of the old random names (remove_stale).
    return os.path.join("/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir(), f"psemu-etcd.{prefix}")


class MultiTestbed(R.Testbed):
    def __init__(self, prefix, workdir, hosts):
        super().__init__(prefix, workdir)
        self.hosts = hosts
        self.ns = {"gw": f"{prefix}-gw", "wk": f"{prefix}-wk"}
        for k in range(hosts):
            self.ns[f"ps{k}"] = f"{prefix}-ps{k}"
        self.tmpdirs = []

    def up(self, n_worker_addrs, mtu=1500):
        self.remove_stale()
        for n in self.ns.values():
            sh(["ip", "netns", "add", n])
            sh(["ip", "-n", n, "link", "set", "dev", "lo", "up"])
        gw, wk = self.ns["gw"], self.ns["wk"]
        ends = []
        for k in range(self.hosts):
            ps = self.ns[f"ps{k}"]
            sh(["ip", "-n", ps, "link", "add", "name", "ps0", "type", "veth", "peer", "name", f"gwps{k}", "netns", gw])
            sh(["ip", "-n", wk, "link", "add", "name", f"wk{k}", "type", "veth", "peer", "name", f"gwwk{k}",
                "netns", gw])
            sh(["ip", "netns", "exec", ps, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"], check=False)
            sh(["ip", "-n", ps, "addr", "add", f"{ps_addr(k)}/24", "dev", "ps0"])
            for i in range(n_worker_addrs):
                sh(["ip", "-n", wk, "addr", "add", f"{worker_addr(k, i)}/24", "dev", f"wk{k}"])
            ends += [(ps, "ps0"), (wk, f"wk{k}"), (gw, f"gwps{k}"), (gw, f"gwwk{k}")]
        sh(["ip", "netns", "exec", wk, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"], check=False)
        for n, dev in ends:
            # As in the single-host testbed: real checksums, MTU-sized frames.
            r = sh(["ip", "netns", "exec", n, "ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off",
                    "gro", "off"], check=False, quiet=True)
            if r.returncode != 0:
                raise Fail(f"ethtool -K {dev} failed: {r.stdout.strip()}")
            sh(["ip", "-n", n, "link", "set", "dev", dev, "mtu", str(mtu)])
            sh(["ip", "-n", n, "link", "set", "dev", dev, "up"])

    def remove_stale(self):
        """The single-host clean-up (namespaces of any host count, their
        processes, EAL directories), and etcd's data a killed run left: this
        prefix's, and the randomly named ones (psemu-etcd-XXXXXXXX) that
        runs before etcd_dir left, unless a running process names one."""
        super().remove_stale()
        ours = etcd_dir(self.prefix)
        base = os.path.dirname(ours)
        # tempfile.mkdtemp's names, an hour old at least: an older script's
        # run may be between making one and starting the etcd that names it.
        stale = [os.path.join(base, d) for d in os.listdir(base)
                 if re.fullmatch(r"psemu-etcd-[a-z0-9_]{8}", d)
                 and time.time() - os.path.getmtime(os.path.join(base, d)) > 3600]
        if stale:  # not ours by name: skip one a live etcd (any run's) still names
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read().decode(errors="replace")
                except OSError:
                    continue
                stale = [d for d in stale if d not in cmd]
        if os.path.isdir(ours):
            stale.append(ours)
        for d in stale:
            log(f"removing stale etcd data {d}")
            shutil.rmtree(d, ignore_errors=True)

    def down(self):
        super().down()
        for d in self.tmpdirs:
            shutil.rmtree(d, ignore_errors=True)
        self.tmpdirs = []


# ---------------------------------------------------------------------------
# etcd, in the gateway namespace


def start_etcd(tb, workdir):
    data = etcd_dir(tb.prefix)
    shutil.rmtree(data, ignore_errors=True)  # a fresh cluster: no member's earlier state
    os.makedirs(data)
    tb.tmpdirs.append(data)
    initial = ",".join(f"{n}=http://{ip}:{ETCD_PEER}" for n, ip in ETCD_MEMBERS)
    for name, ip in ETCD_MEMBERS:
        # Slow heartbeats and elections: on a loaded 2-core machine the default
        # 100 ms / 1 s make the members re-elect whenever one is preempted.
        tb.start(f"etcd {name}", "gw",
                 ["etcd", "--name", name, "--data-dir", os.path.join(data, name),
                  "--listen-client-urls", f"http://{ip}:{ETCD_CLIENT}",
                  "--advertise-client-urls", f"http://{ip}:{ETCD_CLIENT}",
                  "--listen-peer-urls", f"http://{ip}:{ETCD_PEER}",
                  "--initial-advertise-peer-urls", f"http://{ip}:{ETCD_PEER}",
                  "--initial-cluster", initial, "--initial-cluster-token", "psemu",
                  "--initial-cluster-state", "new", "--heartbeat-interval", "250", "--election-timeout", "2500",
                  "--log-level", "warn"],
                 os.path.join(workdir, f"etcd-{name}.log"))
    eps = ",".join(etcd_endpoints())

    def healthy():
        r = subprocess.run(["ip", "netns", "exec", tb.ns["gw"], "etcdctl", "--endpoints", eps, "endpoint", "health"],
                           env=dict(os.environ, ETCDCTL_API="3"), capture_output=True, text=True, timeout=30)
        return r.returncode == 0
    wait_for(healthy, 60, "etcd (3 members) healthy")


def etcd_endpoints():
    return [f"http://{ip}:{ETCD_CLIENT}" for _, ip in ETCD_MEMBERS]


# ---------------------------------------------------------------------------
# Gateways


def gateway_config(args, k, workdir, file_prefix, cluster_prefix):
    """The single-host testbed's psgate settings for host k; in cluster mode a
    [cluster] table. No jobs: they come through psgatectl (or the store)."""
    afp = R.afp_device_args(args)
    classes = R.job_classes(args.jobs)
    lines = [
        "# generated by perf/psemu/run --ps-hosts",
        "[eal]",
        f'args = ["--no-huge", "-m", "512", "--no-pci", "--file-prefix={file_prefix}", "--log-level=4"]',
        "[ports.wire]   # towards the workers",
        f'device = "net_af_packet{2 * k + 1},iface=gwwk{k}{afp}"',
        "[ports.host]   # towards PS host k",
        f'device = "net_af_packet{2 * k},iface=gwps{k}{afp}"',
        "[lcores]",
        f"main = {args.main_lcore}",
        f"data = [{args.data_lcores[k % len(args.data_lcores)]}]",
        "[shaper.wire]  # PS host k's egress: the pulls",
        f'rate = "{args.rate}"',
        f'burst = "{args.burst}"',
        "[classes]", f"count = {classes}", f"depth = {args.depth}",
    ]
    if args.floor:  # as in the single-host testbed: every job class but the top one
        for c in range(2, min(args.jobs, classes - 2) + 1):
            lines += [f"[classes.{c}]", f'floor = "{args.floor}"', f'floor_burst = "{args.floor_burst}"']
    lines += ["[stats]", 'interval = "0s"', "[control]", f'socket = "{sock(workdir, k)}"']
    if cluster_prefix:
        lines += ["[cluster]", f"endpoints = {json.dumps(etcd_endpoints())}", f'name = "gw{k}"',
                  f'prefix = "{cluster_prefix}"', f'lease_ttl = "{args.lease_ttl}"']
    return "\n".join(lines) + "\n"


def start_gateway(tb, args, workdir, k, cfg):
    """Starts gateway k and waits for its control socket. net_af_packet names
    its PACKET_FANOUT group (pid ^ ifindex) & 0xffff, and fanout groups are
    per network namespace: two gateways in one namespace collide when their
    pids and ifindexes happen to match up (seen in 2 of 12 starts), and the
    second one's probe fails with EINVAL. A new process has a new pid: retry."""
    gw_log = os.path.join(workdir, f"gw{k}.log")
    for attempt in range(6):
        p = tb.start(f"psgate gw{k}", "gw", [args.psgate, "--config", cfg, "--stats-json",
                                             os.path.join(workdir, f"gw{k}-stats.json")], gw_log)
        try:
            wait_for(lambda: ctl(args, workdir, k, "health", check=False).returncode == 0, 60,
                     f"gw{k} control socket", p, gw_log)
            return p, gw_log
        except Fail:
            if p.poll() is None or "PACKET_FANOUT" not in open(gw_log).read() or attempt == 5:
                raise
            log(f"gw{k}: af_packet fanout group collision with another gateway; starting it again")
    raise AssertionError("unreachable")


def sock(workdir, k):
    return f"{workdir}/gw{k}.sock"


def ctl(args, workdir, k, *argv, check=True, timeout="10s"):
    cmd = [args.psgatectl, "-s", sock(workdir, k), "--timeout", timeout] + [str(a) for a in argv]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    if check and r.returncode != 0:
        raise Fail(f"gw{k}: psgatectl failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout.strip()}")
    return r


def jobs_on(args, workdir, k):
    """Gateway k's applied jobs: {id: pull_class}, or None when it does not answer."""
    return jobs_on_all(args, workdir, [k])[0]


def jobs_on_all(args, workdir, gateways):
    """Every listed gateway's applied jobs, asked at the same moment (one
    psgatectl each, in parallel): asked one after the other, a sample would
    span a few hundred ms of a loaded machine and see a removal on one gateway
    and not yet on the next."""
    procs = [subprocess.Popen([args.psgatectl, "-s", sock(workdir, k), "--timeout", "2s", "jobs", "list", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for k in gateways]
    out = []
    for p in procs:
        try:
            text, _ = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            out.append(None)
            continue
        try:
            reply = json.loads(text) if p.returncode == 0 else None
        except json.JSONDecodeError:
            reply = None
        out.append(None if reply is None else
                   {j["id"]: j["pull_class"] for j in reply.get("result", reply).get("jobs", [])})
    return out


def host_order(args, k):
    """Host k's operator order under the local policies: 1..n rotated by k, so
    the hosts put different jobs on top (independent per-host tooling)."""
    ids = list(range(1, args.jobs + 1))
    r = k % args.jobs
    return ids[r:] + ids[:r]


def job_matches(args, j):
    # One rule set for every host (as a cluster's job document must be): any
    # PS host's address, job j's port.
    port = args.base_port + j
    return ["--match", f"src=10.77.0.0/16,sport={port},proto=tcp", "--match", f"dst=10.77.0.0/16,dport={port},proto=tcp"]


def set_up_policy(args, name, workdir):
    """Adds the jobs and chooses the policy; returns the psgatectl commands, per gateway."""
    policy, cluster = POLICY_OF[name]
    done = {}
    targets = [0] if cluster else list(range(args.ps_hosts))
    for k in targets:
        cmds = []
        for j in range(args.jobs):
            ctl(args, workdir, k, "jobs", "add", j + 1, *job_matches(args, j), "--name", f"job-{j}")
        cmds.append(f"jobs add 1..{args.jobs}")
        ctl(args, workdir, k, "policy", policy)
        cmds.append(f"policy {policy}")
        if cluster:
            if policy == "static":
                order = list(range(1, args.jobs + 1))
                ctl(args, workdir, k, "order", *order)
                cmds.append("order " + " ".join(map(str, order)))
        elif policy != "fifo":
            order = host_order(args, k)
            ctl(args, workdir, k, "order", *order)
            cmds.append("order " + " ".join(map(str, order)))
        done[f"gw{k}"] = cmds
    # Every gateway has applied every job (the cluster's through the store).
    for k in range(args.ps_hosts):
        wait_for(lambda: (jobs_on(args, workdir, k) or {}).keys() == set(range(1, args.jobs + 1)), 60,
                 f"gw{k}: {args.jobs} jobs applied")
    return done


def progress_hook(args, name, workdir):
    """Run by psemu's workers after each job iteration: progress (and removal
    when done) through gateway 0 in cluster mode, or to every gateway alone;
    each job's reports in order, a stale one dropped (run's ordered_hook)."""
    _, cluster = POLICY_OF[name]
    socks = [sock(workdir, 0)] if cluster else [sock(workdir, k) for k in range(args.ps_hosts)]
    c = args.psgatectl
    body = (f"rc=0; for s in {' '.join(socks)}; do {c} -s $s progress {{id}} {{fraction}} --iteration {{iter}}"
            f" && if [ {{iter}} -eq {{iters}} ]; then {c} -s $s jobs remove {{id}}; fi || rc=1; done; exit $rc")
    return R.ordered_hook(f"{workdir}/progress-job{{id}}", body)


class TopPoller(threading.Thread):
    """Polls every gateway's applied ranks; records, per sample, each
    gateway's top jobs (the ids with the lowest pull class)."""

    def __init__(self, args, workdir, interval_s):
        super().__init__(daemon=True)
        self.args, self.workdir, self.interval = args, workdir, interval_s
        self.samples = []  # (t_monotonic_s, [sorted top ids per gateway or None])
        self.stop_event = threading.Event()

    def run(self):
        while not self.stop_event.is_set():
            t = time.monotonic()
            tops = []
            try:
                answers = jobs_on_all(self.args, self.workdir, range(self.args.ps_hosts))
            except OSError:
                answers = [None] * self.args.ps_hosts
            for jobs in answers:
                if not jobs:
                    tops.append(None)
                    continue
                best = min(jobs.values())
                tops.append(sorted(i for i, c in jobs.items() if c == best))
            self.samples.append((t, tops))
            self.stop_event.wait(max(0.0, self.interval - (time.monotonic() - t)))


def disagreement(samples, t0, t1):
    """Fraction of the samples in [t0, t1] (every gateway answered with jobs)
    in which the gateways' top jobs differ."""
    valid = [tops for t, tops in samples if t0 <= t <= t1 and all(x is not None for x in tops)]
    if not valid:
        return None, 0
    differ = sum(1 for tops in valid if any(x != tops[0] for x in tops[1:]))
    return differ / len(valid), len(valid)


# ---------------------------------------------------------------------------
# One policy


def run_policy(args, name, workdir):
    # Fresh, as in run: results are read from files in here, and the
    # progress hook's per-job state must start from iteration 0.
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    tb = MultiTestbed(args.ns_prefix, workdir, args.ps_hosts)
    n_addrs = min(args.workers, 50)
    _, cluster = POLICY_OF[name]
    result = {"policy": name, "ok": False, "error": ""}
    t_start = time.monotonic()
    poller = None
    try:
        tb.up(n_addrs)
        if cluster:
            start_etcd(tb, workdir)
        gws = []
        for k in range(args.ps_hosts):
            file_prefix = f"{args.ns_prefix}-{os.getpid()}-gw{k}"
            tb.dpdk_prefixes.append(file_prefix)
            cfg = os.path.join(workdir, f"gw{k}.toml")
            with open(cfg, "w") as f:
                f.write(gateway_config(args, k, workdir, file_prefix, f"/psemu/{name}" if cluster else None))
            gws.append(start_gateway(tb, args, workdir, k, cfg))
        result["psgatectl"] = set_up_policy(args, name, workdir)
        log(f"{name}: psgatectl {result['psgatectl']}")

        m = parse_size(args.bytes)
        common = ["--jobs", str(args.jobs), "--workers", str(args.workers), "--iters", str(args.iters),
                  "--base-port", str(args.base_port), "--timeout", str(args.policy_timeout),
                  "--idle-timeout", str(args.idle_timeout)]
        pss = []
        for k in range(args.ps_hosts):
            out, lg = os.path.join(workdir, f"ps{k}.json"), os.path.join(workdir, f"ps{k}.log")
            p = tb.start(f"psemu ps{k}", f"ps{k}", [args.psemu, "ps", "--listen", ps_addr(k), "--out", out,
                                                    "--bytes", str(shard_bytes(m, args.ps_hosts, k))] + common, lg)
            pss.append((p, out, lg))
        for k, (p, out, lg) in enumerate(pss):
            wait_for(lambda: "listening" in open(lg).read(), 20, f"psemu ps{k} start-up", p, lg)
        local = ";".join(",".join(worker_addr(k, i) for i in range(n_addrs)) for k in range(args.ps_hosts))
        wk_json, wk_log = os.path.join(workdir, "worker.json"), os.path.join(workdir, "worker.log")
        t_run0 = time.monotonic()
        wk = tb.start("psemu worker", "wk",
                      [args.psemu, "worker", "--ps", ",".join(ps_addr(k) for k in range(args.ps_hosts)),
                       "--bytes", str(m), "--compute-ms", str(args.compute_ms), "--local-addrs", local,
                       "--out", wk_json, "--progress-cmd", progress_hook(args, name, workdir)] + common, wk_log)
        # Started after the last tb.start: the processes die with the thread
        # that forked them (R.die_with_parent), which must be the main one,
        # and a fork with another thread running is best avoided. Its first
        # sample is taken milliseconds after t_run0, as the worker starts up.
        poller = TopPoller(args, workdir, args.poll_ms / 1000.0)
        poller.start()
        try:
            wk.wait(timeout=args.policy_timeout + 30)
        except subprocess.TimeoutExpired:
            raise Fail(f"psemu worker still running after {args.policy_timeout + 30} s")
        t_run1 = time.monotonic()
        poller.stop_event.set()
        poller.join(timeout=15)
        for p, _, _ in pss:
            try:
                p.wait(timeout=20 if wk.returncode == 0 else 1)
            except subprocess.TimeoutExpired:
                tb.stop(p)
        result["wall_s"] = time.monotonic() - t_start
        frac, n = disagreement(poller.samples, t_run0, t_run1)
        result["top_disagreement"] = frac
        result["top_samples"] = n
        result["top_timeline"] = [[round(t - t_run0, 3), tops] for t, tops in poller.samples]
        if cluster:
            r = ctl(args, workdir, 0, "cluster", "--json", check=False)
            try:
                result["cluster_status"] = json.loads(r.stdout)
            except json.JSONDecodeError:
                result["cluster_status"] = r.stdout[-2000:]
        # The namespaces are fresh per policy: their counters are this run's.
        result["tcp"] = {role: R.tcp_counters(tb.ns[role]) for role in tb.ns}
        result["psgate_exit"], result["psgate_drops"] = {}, {}
        for k, (p, gw_log) in enumerate(gws):
            result["psgate_exit"][f"gw{k}"] = tb.stop(p, grace=20.0)
            stats = os.path.join(workdir, f"gw{k}-stats.json")
            if os.path.exists(stats) and os.path.getsize(stats) > 0:
                with open(stats) as f:
                    st = json.load(f)
                drops = {}
                for port in st["ports"].values():
                    for key, v in port["drops"].items():
                        drops[key] = drops.get(key, 0) + v
                result["psgate_drops"][f"gw{k}"] = {key: v for key, v in drops.items() if v}
        if os.path.exists(wk_json):
            with open(wk_json) as f:
                result["worker"] = json.load(f)
        result["ps"] = []
        for k, (p, out, lg) in enumerate(pss):
            if os.path.exists(out):
                with open(out) as f:
                    result["ps"].append(json.load(f))
            if p.returncode != 0:
                raise Fail(f"psemu ps{k} exited with {p.returncode}: {open(lg).read()[-2000:].strip()}")
        if wk.returncode != 0:
            raise Fail(f"psemu worker exited with {wk.returncode}: {open(wk_log).read()[-2000:].strip()}")
        result["ok"] = True
    except Fail as e:
        result["error"] = str(e)
        log(f"{name}: FAILED: {e}")
    finally:
        if poller is not None:
            poller.stop_event.set()
            # Joined before anything else forks: the next policy's processes
            # are started with a preexec_fn (R.die_with_parent).
            poller.join(timeout=15)
        tb.down()
        R.clear_hook_state(workdir)
    return result


# ---------------------------------------------------------------------------
# Measurements


def analyse(res, args):
    """JCT per job, every byte per shard, barrier waits per shard, the wait
    for the slowest shard, and each host's finish order."""
    wk, pss = res["worker"], res["ps"]
    H, W, K = args.ps_hosts, args.workers, args.iters
    m = parse_size(args.bytes)
    checks, jobs = [], []
    waits, shard_waits = [], []
    host_end = [dict() for _ in range(H)]  # host -> job -> last pull end (s)
    for wj in wk["jobs"]:
        j = wj["job"]
        if not wj["complete"]:
            checks.append(f"job {j} incomplete at the workers")
            continue
        for k in range(H):
            pj = pss[k]["jobs"][j]
            if not pj["complete"]:
                checks.append(f"job {j}: PS host {k} incomplete")
                continue
            sb = shard_bytes(m, H, k)
            exp_up, exp_down = W * (40 + K * (40 + sb)), W * K * (40 + sb)
            up = sum(w["shards"][k]["bytes_sent"] for w in wj["workers"])
            down = sum(w["shards"][k]["bytes_received"] for w in wj["workers"])
            if up != pj["bytes_received"] or up != exp_up:
                checks.append(f"job {j} host {k}: workers sent {up} B, PS received {pj['bytes_received']} B, "
                              f"expected {exp_up} B")
            if down != pj["bytes_sent"] or down != exp_down:
                checks.append(f"job {j} host {k}: PS sent {pj['bytes_sent']} B, workers received {down} B, "
                              f"expected {exp_down} B")
            if pj["checksum_errors"]:
                checks.append(f"job {j} host {k}: {pj['checksum_errors']} push checksum errors")
            # Barrier wait at host k: its barrier minus this worker's push arrival.
            for it in pj["iterations"]:
                for pw in it["workers"]:
                    waits.append((it["barrier_us"] - pw[1]) / 1e3)
            host_end[k][j] = max(w["shards"][k]["iterations"][K - 1][4] for w in wj["workers"]) / 1e6
        for w in wj["workers"]:
            if w["checksum_errors"]:
                checks.append(f"job {j} worker {w['worker']}: {w['checksum_errors']} pull checksum errors")
            # How long the worker's iteration waited for its slowest shard.
            for i in range(K):
                ends = [s["iterations"][i][4] for s in w["shards"]]
                shard_waits.append((max(ends) - min(ends)) / 1e3)
        jobs.append({"job": j, "start_s": wj["start_us"] / 1e6, "end_s": wj["end_us"] / 1e6,
                     "jct_s": wj["jct_ms"] / 1e3})
    summary = {}
    if jobs:
        jct = [x["jct_s"] for x in jobs]
        t0 = min(x["start_s"] for x in jobs)
        summary = {
            "jobs_complete": len(jobs), "mean_jct_s": statistics.fmean(jct), "p95_jct_s": pct(jct, 95),
            "makespan_s": max(x["end_s"] for x in jobs) - t0,
            "barrier_wait_mean_ms": statistics.fmean(waits) if waits else None,
            "barrier_wait_var_ms2": statistics.pvariance(waits) if waits else None,
            "shard_wait_mean_ms": statistics.fmean(shard_waits) if shard_waits else None,
            "finish_order": [x["job"] for x in sorted(jobs, key=lambda x: x["end_s"])],
            "finish_order_by_host": [sorted(e, key=e.get) for e in host_end],
            "top_disagreement": res.get("top_disagreement"), "top_samples": res.get("top_samples"),
        }
    if res["worker"].get("progress_cmd_failures"):
        checks.append(f"{res['worker']['progress_cmd_failures']} of {res['worker']['progress_cmd_runs']} "
                      "progress reports failed")
    for gw, rc in (res.get("psgate_exit") or {}).items():
        if rc not in (None, 0):
            checks.append(f"{gw} exited with status {rc}")
    tcp = res.get("tcp") or {}
    loss = {"psgate_drops": res.get("psgate_drops"),
            "ps_retrans_segs": sum((tcp.get(f"ps{k}") or {}).get("RetransSegs", 0) for k in range(H)),
            "ps_timeouts": sum((tcp.get(f"ps{k}") or {}).get("TCPTimeouts", 0) for k in range(H)),
            "wk_retrans_segs": (tcp.get("wk") or {}).get("RetransSegs"),
            "wk_timeouts": (tcp.get("wk") or {}).get("TCPTimeouts")}
    return {"jobs": jobs, "summary": summary, "checks": checks, "barrier_wait_ms": waits,
            "shard_wait_ms": shard_waits, "loss": loss}


def evaluate(args, name, res):
    """One policy's entry in results.json from run_policy's result: the
    analysis and every check; returns (entry, failures)."""
    entry = {k: res.get(k) for k in ("ok", "error", "wall_s", "psgatectl", "psgate_exit", "top_disagreement",
                                     "top_samples", "top_timeline", "cluster_status")}
    if not res["ok"]:
        return entry, [f"{name}: {res['error'].splitlines()[0] if res['error'] else 'failed'}"]
    entry.update(analyse(res, args))
    entry["raw"] = {"ps": res["ps"], "worker": res["worker"]}
    s = entry["summary"]
    if s:
        dis = s["top_disagreement"]
        log(f"{name}: mean JCT {s['mean_jct_s']:.2f} s, p95 {s['p95_jct_s']:.2f} s, makespan "
            f"{s['makespan_s']:.2f} s, barrier wait {s['barrier_wait_mean_ms']:.1f} ms (var "
            f"{s['barrier_wait_var_ms2']:.0f} ms²), shard wait {s['shard_wait_mean_ms']:.1f} ms, "
            f"hosts disagree {'-' if dis is None else f'{100 * dis:.0f}%'}, finish order by host "
            f"{s['finish_order_by_host']}, wall {res['wall_s']:.1f} s")
    failures = []
    for c in entry["checks"]:
        log(f"{name}: CHECK FAILED: {c}")
        failures.append(f"{name}: {c}")
    return entry, failures


def improvement(base, val):
    return None if not base or val is None else (base - val) / base * 100.0


def verdict(report):
    fifo = (report["policies"].get("fifo") or {}).get("summary") or {}
    if not fifo:
        return None
    imp = {n: improvement(fifo["mean_jct_s"], (p.get("summary") or {}).get("mean_jct_s"))
           for n, p in report["policies"].items() if n != "fifo" and p.get("summary")}
    cl = {n: v for n, v in imp.items() if n.startswith("cluster") and v is not None}
    lo = {n: v for n, v in imp.items() if n.startswith("local") and v is not None}
    if not cl:
        return None
    bc = max(cl, key=cl.get)
    text = f"Best cluster policy: `{bc}`, mean JCT {cl[bc]:+.1f}% lower than fifo (target >= 25%: " \
           f"{'reached' if cl[bc] >= 25 else 'not reached'})"
    if lo:
        bl = max(lo, key=lo.get)
        gap = cl[bc] - lo[bl]
        text += f"; best local policy `{bl}` {lo[bl]:+.1f}%, so the cluster order gains {gap:.1f} points more " \
                f"(target >= 10: {'reached' if gap >= 10 else 'not reached'})"
    return text + "."


def markdown(report):
    sc, m = report["scenario"], report["machine"]
    out = [f"# psemu across {sc['ps_hosts']} PS hosts: per-host orders against one cluster order "
           f"({sc['scale']} scenario)", "",
           f"{sc['jobs']} jobs x {sc['workers']} workers, each job sharded over {sc['ps_hosts']} PS hosts "
           f"(one psgate each, egress shaped to {sc['rate']}, burst {sc['burst']}, depth {sc['depth']}, floor "
           f"{sc['floor'] or 'none'} on job classes 2..n); M = {sc['bytes']} per push and pull split over the "
           f"hosts, C = {sc['compute_ms']} ms, K = {sc['iters']} iterations, jobs start together. psgate "
           f"data lcores {sc['data_lcores']}; cluster lease {sc['lease_ttl']}; top jobs polled every "
           f"{sc['poll_ms']} ms.", "",
           f"Machine: {m['nproc']} CPUs, {m['cpu_model']}, kernel {m['kernel']}, load at start "
           f"{' '.join(m['loadavg_at_start'])}; psgate {m['psgate_revision']}; {m['date']}.", "",
           "Reproduce: `perf/psemu/run --ps-hosts " + str(sc["ps_hosts"]) + "` (as root; perf/psemu/README.md). "
           "One run, no repetitions.", "",
           "Barrier wait: per host, worker and iteration, that host's barrier minus the worker's push arrival. "
           "Shard wait: per worker and iteration, its last shard's pull end minus its first's. Hosts disagree: "
           "fraction of polls during the run in which the gateways' top jobs (lowest class) differed.", "",
           "| policy | mean JCT (s) | p95 JCT (s) | makespan (s) | barrier wait mean (ms) | barrier wait var (ms²) "
           "| shard wait mean (ms) | mean JCT vs fifo | hosts disagree | finish order per host | checks |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    fifo = (report["policies"].get("fifo") or {}).get("summary") or {}
    for name, p in report["policies"].items():
        s = p.get("summary") or {}
        if not s:
            out.append(f"| {name} | | | | | | | | | | FAILED: {(p.get('error') or '')[:100]} |")
            continue
        imp = improvement(fifo.get("mean_jct_s"), s["mean_jct_s"])
        dis = s.get("top_disagreement")
        dis_text = "" if dis is None else f"{100 * dis:.0f}% of {s.get('top_samples')}"
        out.append(f"| {name} | {s['mean_jct_s']:.2f} | {s['p95_jct_s']:.2f} | {s['makespan_s']:.2f} | "
                   f"{s['barrier_wait_mean_ms']:.1f} | {s['barrier_wait_var_ms2']:.0f} | "
                   f"{s['shard_wait_mean_ms']:.1f} | {'' if imp is None else f'{imp:+.1f}%'} | "
                   f"{dis_text} | "
                   f"{' / '.join(''.join(map(str, o)) for o in s['finish_order_by_host'])} | "
                   f"{'ok' if not p['checks'] else '; '.join(p['checks'])[:120]} |")
    out += ["", "Per-job JCT (s):", "", "| policy | " + " | ".join(f"job {j}" for j in range(sc["jobs"])) + " |",
            "|---|" + "---:|" * sc["jobs"]]
    for name, p in report["policies"].items():
        if p.get("jobs"):
            jct = {x["job"]: x["jct_s"] for x in p["jobs"]}
            out.append(f"| {name} | " + " | ".join(f"{jct[j]:.2f}" if j in jct else "" for j in range(sc["jobs"])) + " |")
    out += ["", "Loss: psgate's drops by reason per gateway, and the hosts' TCP retransmitted segments and "
            "retransmission timeouts (all PS hosts together; the workers' namespace):", "",
            "| policy | psgate drops | PS retrans segs | PS RTOs | worker retrans segs | worker RTOs |",
            "|---|---|---:|---:|---:|---:|"]
    for name, p in report["policies"].items():
        ls = p.get("loss")
        if ls:
            dr = "; ".join(f"{gw}: " + (", ".join(f"{k} {v}" for k, v in d.items()) or "0")
                           for gw, d in (ls.get("psgate_drops") or {}).items()) or "-"
            out.append(f"| {name} | {dr} | {ls['ps_retrans_segs']} | {ls['ps_timeouts']} | "
                       f"{ls['wk_retrans_segs']} | {ls['wk_timeouts']} |")
    if report.get("verdict"):
        out += ["", report["verdict"]]
    return "\n".join(out) + "\n"


def plots(report, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        log(f"no plots: matplotlib unavailable ({e})")
        return []
    names = [n for n, p in report["policies"].items() if p.get("jobs")]
    if not names:
        log("no plots: no policy completed a job")
        return []
    files = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for n in names:
        jct = sorted(x["jct_s"] for x in report["policies"][n]["jobs"])
        ax.step([0] + jct, [0] + [(i + 1) / len(jct) for i in range(len(jct))], where="post", label=n)
    ax.set_xlabel("job completion time (s)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(f"JCT CDF, {report['scenario']['ps_hosts']} PS hosts")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    files.append(os.path.join(outdir, "jct_cdf.png"))
    fig.savefig(files[-1], dpi=110)
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, key, title in ((axes[0], "barrier_wait_ms", "Barrier wait per host"),
                           (axes[1], "shard_wait_ms", "Wait for the slowest shard")):
        R.boxplot(ax, [report["policies"][n][key] for n in names], names, flierprops={"markersize": 2})
        ax.set_ylabel("ms, per worker and iteration")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3, axis="y")
        ax.tick_params(axis="x", labelrotation=20)
    fig.tight_layout()
    files.append(os.path.join(outdir, "barrier_wait.png"))
    fig.savefig(files[-1], dpi=110)
    plt.close(fig)
    return files


# ---------------------------------------------------------------------------


def parse_args(argv):
    import argparse
    ap = argparse.ArgumentParser(prog="perf/psemu/run --ps-hosts H", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ps-hosts", type=int, required=True, help="PS hosts, each behind its own psgate (2..8)")
    ap.add_argument("--scale", choices=sorted(SCALES), default=None,
                    help="Preset scenario (default: default; --test: test)")
    ap.add_argument("--test", action="store_true",
                    help="The suite's test: --scale test, every policy, checks that job 0 finishes first on every "
                         "host under cluster-static, no plots")
    ap.add_argument("--policies", default=",".join(POLICIES),
                    help=f"Comma-separated, from {','.join(POLICIES)} (default: all)")
    ap.add_argument("--jobs", type=int, help="Jobs (default per --scale: 4, big 8, test 2)")
    ap.add_argument("--workers", type=int, help="Workers per job (default per --scale: 3, big 8, test 2)")
    ap.add_argument("--bytes", help="Push and pull size M per worker, split over the hosts (65536, 4kB, 2MiB; "
                                    "default per --scale: 2MiB, big 4MiB, test 1MiB)")
    ap.add_argument("--iters", type=int, help="Iterations K (default per --scale: 12, big 30, test 4)")
    ap.add_argument("--compute-ms", type=float, help="Compute time C per iteration, ms (default 20, test 10)")
    ap.add_argument("--rate", help="Each gateway's shaper on its PS host's egress (default per --scale: "
                                   "100Mbit/s, big 1Gbit/s, test 40Mbit/s)")
    ap.add_argument("--floor", default=None,
                    help='Floor on every job class but the top one ("" none; default per --scale: 5Mbit/s, '
                         'big 10Mbit/s, test 2Mbit/s)')
    ap.add_argument("--floor-burst", default="64KiB", help="Floor bucket depth")
    ap.add_argument("--burst", default="1MiB", help="Each gateway's shaper burst")
    ap.add_argument("--depth", type=int, default=4096, help="psgate class queue depth, packets")
    ap.add_argument("--afp-args", default="framecnt=4096",
                    help="Extra net_af_packet arguments (default framecnt=4096: the kernel RX ring, frames)")
    ap.add_argument("--main-lcore", type=int, default=0, help="Every gateway's main lcore")
    ap.add_argument("--data-lcores", default="1",
                    help="Comma-separated CPUs for the gateways' data lcores, gateway k takes entry k mod n "
                         "(default 1: on 2 cores every gateway polls on CPU 1)")
    ap.add_argument("--lease-ttl", default="6s", help="Cluster lease (psgate [cluster] lease_ttl; default 6s)")
    ap.add_argument("--poll-ms", type=float, default=250,
                    help="How often each gateway's top job is read, ms (default 250)")
    ap.add_argument("--base-port", type=int, default=2222, help="Job j's PS port on every host: this + j")
    ap.add_argument("--policy-timeout", type=float, default=None,
                    help="psemu's global timeout per policy, s (default 300, --test 120)")
    ap.add_argument("--idle-timeout", type=float, default=30, help="psemu gives up when nothing moved this long, s")
    ap.add_argument("--timeout", type=float, default=None,
                    help="Whole script, s, including the wait for another run's lock (default 3000, --test 500: "
                         "below meson's 600)")
    ap.add_argument("--ns-prefix", default=None, help="Namespace name prefix (default psemc, test psemct)")
    ap.add_argument("--results", default=None,
                    help="Output directory (default perf/results/psemu-cluster; installed: "
                         "./psgate-results/psemu-cluster; --test: $TMPDIR/psemu-cluster-test-PID, removed when "
                         "every check passed); raw files in <results>/raw/<policy>/")
    ap.add_argument("--psemu", default=None, help="psemu binary (default: the newest build's, else installed)")
    ap.add_argument("--psgate", default=None, help="psgate binary (default: the newest build's, else installed)")
    ap.add_argument("--psgatectl", default=None, help="psgatectl binary (default: next to psgate)")
    ap.add_argument("--no-plots", action="store_true", help="Write no plots")
    args = ap.parse_args(argv)
    if not 2 <= args.ps_hosts <= 8:
        ap.error("--ps-hosts: 2..8 (one host: perf/psemu/run without --ps-hosts)")
    args.scale = args.scale or ("test" if args.test else "default")
    for key, val in SCALES[args.scale].items():
        if getattr(args, key) is None:
            setattr(args, key, val)
    args.policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    for p in args.policies:
        if p not in POLICY_OF:
            ap.error(f"unknown policy '{p}' (known: {', '.join(POLICIES)})")
    try:
        args.data_lcores = [int(x) for x in args.data_lcores.split(",")]
    except ValueError:
        ap.error(f"--data-lcores '{args.data_lcores}': expected CPU numbers such as 1 or 2,3")
    try:
        parse_size(args.bytes)
    except ValueError as e:
        ap.error(f"--bytes: {e}")
    args.mtu = 1500
    if args.afp_args and not args.afp_args.startswith(","):
        args.afp_args = "," + args.afp_args
    if args.policy_timeout is None:
        args.policy_timeout = 120 if args.test else 300
    if args.timeout is None:
        # meson kills the test at 600 s (and then its process group): the
        # script's own limit comes first and leaves it time to clean up.
        args.timeout = 500 if args.test else 3000
    if args.ns_prefix is None:
        args.ns_prefix = "psemct" if args.test else "psemc"
    # Removed after a passing --test: only a directory the script chose itself.
    args.results_temporary = args.results is None and args.test
    if args.results is None:
        args.results = R.locate.results_dir("psemu-cluster") if not args.test else \
            os.path.join(os.environ.get("TMPDIR", "/tmp"), f"psemu-cluster-test-{os.getpid()}")
    # As run: the newest of the tree's build directories, else the installed binaries.
    args.psemu = args.psemu or R.locate.find("psemu")
    args.psgate = args.psgate or R.locate.find("psgate")
    if args.psgatectl is None and args.psgate:
        args.psgatectl = R.psgatectl_beside(args.psgate)
    for what in ("psemu", "psgate", "psgatectl"):
        if not getattr(args, what):
            ap.error(f"{what} binary not found: build it or pass --{what}")
    return args


def main(argv):
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("psemu run --ps-hosts: needs root (network namespaces, veths); skipping", file=sys.stderr)
        return 77
    if any(POLICY_OF[p][1] for p in args.policies) and not (shutil.which("etcd") and shutil.which("etcdctl")):
        print("psemu run --ps-hosts: etcd/etcdctl not installed (tools/setup installs them); skipping",
              file=sys.stderr)
        return 77
    for tool in ("ip", "ethtool", "flock"):
        if not shutil.which(tool):
            print(f"psemu run: '{tool}' is not installed", file=sys.stderr)
            return 1
    if any(POLICY_OF[p][1] for p in args.policies):
        # A psgate built without gRPC refuses a [cluster] table: skip, as the cluster test does.
        probe_dir = tempfile.mkdtemp(prefix="psemu-probe-")
        try:
            probe = os.path.join(probe_dir, "probe.toml")
            with open(probe, "w") as f:
                f.write(gateway_config(args, 0, probe_dir, "psemu-probe", "/psemu/probe"))
            r = subprocess.run([args.psgate, "--config", probe, "--check"], capture_output=True, text=True)
        finally:
            shutil.rmtree(probe_dir, ignore_errors=True)
        if "built without cluster mode" in r.stderr:
            print("psemu run --ps-hosts: psgate built without cluster mode; skipping", file=sys.stderr)
            return 77

    def on_signal(sig, _frame):
        raise KeyboardInterrupt(f"signal {sig}")

    def on_alarm(_sig, _frame):
        raise TimeoutError(f"global timeout of {args.timeout:.0f} s reached")

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(int(args.timeout))

    os.makedirs(args.results, exist_ok=True)
    workdir = os.path.join(args.results, "raw")
    scenario = {k: getattr(args, k) for k in ("ps_hosts", "scale", "jobs", "workers", "bytes", "iters", "compute_ms",
                                              "rate", "burst", "depth", "floor", "floor_burst", "afp_args",
                                              "data_lcores", "lease_ttl", "poll_ms", "psemu", "psgate")}
    report = {"machine": R.machine(args.psgate), "scenario": scenario, "policies": {}}
    log(f"{args.ps_hosts} PS hosts, {args.jobs} jobs x {args.workers} workers, M={args.bytes}, K={args.iters}, "
        f"C={args.compute_ms} ms, {args.rate} per host; policies {','.join(args.policies)}")
    failures = []
    lock = None
    try:
        lock = R.take_lock(args.ns_prefix, min(600.0, args.timeout / 2))
        MultiTestbed(args.ns_prefix, workdir, args.ps_hosts).remove_stale()
        R.remove_stale_raw(workdir, POLICIES, args.policies)
        for name in args.policies:
            log(f"{name}: running")
            try:
                entry, fails = evaluate(args, name, run_policy(args, name, os.path.join(workdir, name)))
            except TimeoutError:  # the global timeout (SIGALRM) ends the whole run, below
                raise
            except Exception as e:
                # Anything else (a psgatectl past its 30 s, a file psemu left
                # unreadable, a bug here) fails this policy only: the others'
                # measurements are still written to results.json.
                log(f"{name}: FAILED: {traceback.format_exc().strip()}")
                entry = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                fails = [f"{name}: {entry['error'].splitlines()[0]}"]
            failures += fails
            report["policies"][name] = entry
        if args.test and "cluster-static" in report["policies"]:
            s = report["policies"]["cluster-static"].get("summary") or {}
            orders = s.get("finish_order_by_host") or []
            if len(orders) != args.ps_hosts or any(not o or o[0] != 0 for o in orders):
                failures.append(f"cluster-static: the top job (job 0) did not finish first on every host "
                                f"(finish order by host {orders})")
            else:
                log(f"cluster-static: job 0 finished first on every host ({orders}): ok")
    except (KeyboardInterrupt, TimeoutError) as e:
        failures.append(f"interrupted: {e}")
        log(f"interrupted: {e}; cleaning up")
    except Fail as e:
        failures.append(str(e))
        log(f"FAILED: {e}")
    finally:
        signal.alarm(0)
        if lock is not None:
            MultiTestbed(args.ns_prefix, workdir, args.ps_hosts).remove_stale()
            lock.close()
    report["verdict"] = verdict(report)
    if report["verdict"]:
        log(report["verdict"])
    report["failures"] = failures
    with open(os.path.join(args.results, "results.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(args.results, "results.md"), "w") as f:
        f.write(markdown(report))
    if not args.no_plots and not args.test:
        for p in plots(report, args.results):
            log(f"wrote {p}")
    log(f"wrote {args.results}/results.json and results.md")
    if failures:
        log("FAILED:\n  " + "\n  ".join(failures))
        return 1
    log("all checks passed")
    if args.results_temporary:  # never a directory the user named
        shutil.rmtree(args.results, ignore_errors=True)
    return 0
