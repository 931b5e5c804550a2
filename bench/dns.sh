#!/usr/bin/env bash
# bench/dns.sh - run the shared authoritative-DNS benchmark (dnsperf: correctness
# checks, max q/s, fixed 20k q/s, server CPU per query, RSS) with crc-appliance
# as the "crc" target next to dnsmasq and knot, in one run.
#
# Needs: target/release/crc-appliance (cargo build --release), and the
# harness's tools: dnsperf dig taskset python3 (+ dnsmasq, knotd for the peers).
# USAGE: bench/dns.sh [EXTRA TARGETS...]   default targets: dnsmasq knot crc
# ENV: SHARED_BENCH (default: <repo>/../shared/bench), plus the harness knobs
#   REPS DURATION FIXED_QPS CLIENTS OUTSTANDING SUT_CPU CLIENT_CPU KEEP RESULTS_DIR.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_BENCH:-$(cd "$(dirname "$0")/../.." && pwd)/shared/bench}
[[ -x "$shared/dns.sh" ]] || { echo "shared harness not found at $shared (set SHARED_BENCH)" >&2; exit 1; }
[[ -x "$repo/target/release/crc-appliance" ]] || { echo "build first: cargo build --release" >&2; exit 1; }
crc="crc=$repo/bench/targets/dns.sh {addr}:{port} {workdir}"
if [[ $# -gt 0 ]]; then
  exec "$shared/dns.sh" "$@" "$crc"
else
  exec "$shared/dns.sh" dnsmasq knot "$crc"
fi
