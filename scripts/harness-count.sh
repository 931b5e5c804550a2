#!/usr/bin/env bash
# How the integration tests ran their appliances, from the log the test
# harness writes (tests/common: note_harness; one `<how>\t<binary>\t<test>`
# line per appliance started): tests that started one only in-process,
# tests that spawned the binary, of all the integration tests that start
# one and, with COUNTS (scripts/run-tests.sh's target/test-counts.tsv), of
# all the integration tests (the `test:` binaries; the library's unit tests
# are not counted). Informational (issue #39 item 6); never fails the suite.
# Usage: harness-count.sh LOG [COUNTS] [--by-binary]
set -euo pipefail
log=${1:?usage: harness-count.sh LOG [COUNTS] [--by-binary]}
counts=${2:-}
by_binary=${3:-}
[ -s "$log" ] || { echo "harness: no appliance started"; exit 0; }
total=0
if [ -n "$counts" ] && [ -s "$counts" ]; then
  total=$(awk -F'\t' '$1 ~ /^test:/ { t += $2 + $3 } END { print t + 0 }' "$counts")
fi
awk -F'\t' -v total="$total" -v by="$by_binary" '
  { key = $2 "::" $3; how[key] = how[key] " " $1; bin[key] = $2 }
  END {
    for (k in how) {
      n++
      b = bin[k]
      if (how[k] ~ /spawned/) { s++; bs[b]++ } else { i++; bi[b]++ }
      seen[b] = 1
    }
    printf "harness: %d tests started an appliance: %d only in-process (%.0f %%), %d spawned the binary\n", n, i, 100 * i / n, s
    if (total > 0)
      printf "harness: of the %d integration tests, %d ran their appliance in-process (%.0f %%), %d spawned it, %d started none\n", total, i, 100 * i / total, s, total - n
    if (by == "--by-binary")
      for (b in seen) printf "harness:   %-28s in-process %3d  spawned %3d\n", b, bi[b], bs[b]
  }' "$log"
