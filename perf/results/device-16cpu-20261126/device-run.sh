#!/bin/bash
# Device-machine driver for issue 16's measurements: the DPDK libraries travel in .dev/lib
# (this machine has no DPDK), the plugins are linked into EAL's default plugin directory
# (so that a plugin and a library testpmd links are one object, not two copies), and
# testpmd sits where run-bench looks for it.
set -u
# EAL refuses plugins under a world-writable directory (/tmp): unpack where only root writes.
R=/opt/psgate-dev
mkdir -p -m 755 $R && tar -C $R -xJf .devpack/dev.tar.xz --no-same-owner || { echo "unpack failed"; exit 1; }
chmod -R go-w $R
export LD_LIBRARY_PATH=$R/.dev/lib PYTHONUNBUFFERED=1
PM=/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0
mkdir -p $PM
for f in net_pcap net_null net_ring net_memif mempool_ring; do ln -sf $R/.dev/lib/librte_$f.so.23 $PM/librte_$f.so; done
install -m 755 $R/.dev/bin/dpdk-testpmd /usr/bin/dpdk-testpmd
chmod +x perf/run-bench perf/ab-throughput
PY=$(command -v python3)
echo "== $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo); python $PY; $(uname -r)"
for c in 0 1 2 8 9; do echo "cpu$c siblings $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list 2>/dev/null)"; done
grep -E 'HugePages_Total|Hugepagesize' /proc/meminfo
mode=${1:-smoke}
if [ "$mode" = smoke ]; then
  timeout 10 dpdk-testpmd --no-huge -m 512 --no-pci --file-prefix=smk --log-level=4 \
    --vdev=net_null0 --vdev=net_null1 -- --forward-mode=io --stats-period=1 --no-lsc-interrupt --total-num-mbufs=16384 2>&1 | grep -E "Rx-pps|rror|EAL" | head -8
  echo "== testpmd rc ${PIPESTATUS[0]}"
  $R/.dev/build/src/psgate --version 2>&1 | head -3
  timeout 90 $PY perf/run-bench --quick --scenarios classify --variants rule1 --build $R/.dev/build --out /tmp/smoke --workdir /tmp/wd-smoke 2>&1 | tail -25
  cp /tmp/smoke/*.json $OUT/ 2>/dev/null
  exit 0
fi
shift
# main: the pipelined A/B first (short), then issue 16's targets beside testpmd and the sweep.
timeout ${AB_LIM:-150} $PY perf/ab-throughput --base $R/.dev/base --new $R/.dev/build --sizes 64 --lcores ${AB_LCORES:-1,2,8} \
  --reps ${AB_REPS:-3} --warmup 1 --window 2 --out $OUT/ab.json --workdir /tmp/wd-ab > $OUT/ab.log 2>&1
tail -8 $OUT/ab.log
timeout ${BENCH_LIM:-380} $PY perf/run-bench --quick --build $R/.dev/build --out /tmp/bench --workdir /tmp/wd "$@" > $OUT/bench.log 2>&1
echo "== run-bench rc $?"
cp /tmp/bench/*.json /tmp/bench/results.md $OUT/ 2>/dev/null
grep -vE "^\s*$" $OUT/bench.log | tail -70
