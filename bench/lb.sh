#!/usr/bin/env bash
# bench/lb.sh - run the shared TCP load-balancer benchmark (wrk: keep-alive,
# new connection per request, 1 MiB bodies, failover) with crc-appliance as
# the "crc" target next to HAProxy (and "direct", no LB).
#
# Needs: target/release/crc-appliance (cargo build --release), and the
# harness's tools: nginx wrk haproxy python3 taskset.
# USAGE: bench/lb.sh [EXTRA TARGETS...]   default targets: direct haproxy crc
# ENV: SHARED_BENCH (default: <repo>/../shared/bench), plus the harness knobs
#   REPS DURATION CONNS BIG_CONNS FAILOVER SUT_CPU CLIENT_CPU KEEP RESULTS_DIR.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_BENCH:-$repo/../shared/bench}
[[ -x "$shared/lb.sh" ]] || { echo "shared harness not found at $shared (set SHARED_BENCH)" >&2; exit 1; }
[[ -x "$repo/target/release/crc-appliance" ]] || { echo "build first: cargo build --release" >&2; exit 1; }
crc="crc=$repo/bench/targets/lb.sh {addr}:{port} {backends} {inter_ms} {fall} {rise} {workdir}"
if [[ $# -gt 0 ]]; then
  exec "$shared/lb.sh" "$@" "$crc"
else
  exec "$shared/lb.sh" direct haproxy "$crc"
fi
