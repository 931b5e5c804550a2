#!/usr/bin/env bash
# How the integration tests ran their appliances, from the log the test
# harness writes (tests/common: note_harness; one `<how>\t<binary>\t<test>`
# line per appliance started): tests that started one only in-process,
# tests that spawned the binary, of all the integration tests that start
# one. Informational (issue #39 item 6); never fails the suite.
# Usage: harness-count.sh LOG
set -euo pipefail
log=${1:?usage: harness-count.sh LOG}
[ -s "$log" ] || { echo "harness: no appliance started"; exit 0; }
awk -F'\t' '
  { key = $2 "::" $3; how[key] = how[key] " " $1 }
  END {
    for (k in how) {
      n++
      if (how[k] ~ /spawned/) s++; else i++
    }
    printf "harness: %d tests started an appliance: %d only in-process, %d spawned the binary\n", n, i, s
  }' "$log"
