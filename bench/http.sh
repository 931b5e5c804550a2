#!/usr/bin/env bash
# bench/http.sh - run the shared HTTP benchmark (1 GiB image download 1x/4x
# MiB/s, peak server RSS, Range/HEAD/416/sha256 checks, wrk on the ignition
# JSON) with crc-appliance as the "crc" target next to nginx, in one run.
#
# Needs: target/release/crc-appliance (cargo build --release), and the
# harness's tools: curl wrk taskset python3 sha256sum (+ nginx for the peer).
# USAGE: bench/http.sh [PEERS...]   default peers: nginx (crc is always added)
# ENV: SHARED_BENCH (default: <repo>/../shared/bench), plus the harness knobs
#   REPS DL_RUNS DURATION IMAGE_MB SUT_CPU CLIENT_CPU KEEP RESULTS_DIR.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
run_area http "{addr}:{port} {docroot} {workdir}" "nginx" "$@"
