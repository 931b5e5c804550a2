#!/usr/bin/env bash
# bench/dns.sh - run the shared authoritative-DNS benchmark (dnsperf: correctness
# checks, max q/s, fixed 20k q/s, server CPU per query, RSS) with crc-appliance
# as the "crc" target next to dnsmasq and knot, in one run.
#
# Needs: target/release/crc-appliance (cargo build --release), and the
# harness's tools: dnsperf dig taskset python3 (+ dnsmasq, knotd for the peers).
# USAGE: bench/dns.sh [PEERS...]   default peers: dnsmasq knot (crc is always added)
# ENV: SHARED_BENCH (default: <repo>/../shared/bench), plus the harness knobs
#   REPS DURATION FIXED_QPS CLIENTS OUTSTANDING SUT_CPU CLIENT_CPU KEEP RESULTS_DIR.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
run_area dns "{addr}:{port} {workdir}" "dnsmasq knot" "$@"
