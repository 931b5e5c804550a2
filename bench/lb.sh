#!/usr/bin/env bash
# bench/lb.sh - run the shared TCP load-balancer benchmark (wrk: keep-alive,
# new connection per request, 1 MiB bodies, failover) with crc-appliance as
# the "crc" target next to HAProxy (and "direct", no LB).
#
# Needs: target/release/crc-appliance (cargo build --release), and the
# harness's tools: nginx wrk haproxy python3 taskset.
# USAGE: bench/lb.sh [PEERS...]   default peers: direct haproxy (crc is always added)
# ENV: SHARED_BENCH (default: <repo>/../shared/bench), plus the harness knobs
#   REPS DURATION CONNS BIG_CONNS FAILOVER SUT_CPU CLIENT_CPU KEEP RESULTS_DIR.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
run_area lb "{addr}:{port} {backends} {inter_ms} {fall} {rise} {workdir}" "direct haproxy" "$@"
