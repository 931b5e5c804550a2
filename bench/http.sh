#!/usr/bin/env bash
# bench/http.sh - run the shared HTTP benchmark (1 GiB image download 1x/4x
# MiB/s, peak server RSS, Range/HEAD/416/sha256 checks, wrk on the ignition
# JSON) with crc-appliance as the "crc" target next to nginx, in one run.
#
# Needs: target/release/crc-appliance (cargo build --release), and the
# harness's tools: curl wrk taskset python3 sha256sum (+ nginx for the peer).
# USAGE: bench/http.sh [EXTRA TARGETS...]   default targets: nginx crc
# ENV: SHARED_BENCH (default: <repo>/../shared/bench), plus the harness knobs
#   REPS DL_RUNS DURATION IMAGE_MB SUT_CPU CLIENT_CPU KEEP RESULTS_DIR.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_BENCH:-$(cd "$(dirname "$0")/../.." && pwd)/shared/bench}
[[ -x "$shared/http.sh" ]] || { echo "shared harness not found at $shared (set SHARED_BENCH)" >&2; exit 1; }
[[ -x "$repo/target/release/crc-appliance" ]] || { echo "build first: cargo build --release" >&2; exit 1; }
crc="crc=$repo/bench/targets/http.sh {addr}:{port} {docroot} {workdir}"
if [[ $# -gt 0 ]]; then
  exec "$shared/http.sh" "$@" "$crc"
else
  exec "$shared/http.sh" nginx "$crc"
fi
