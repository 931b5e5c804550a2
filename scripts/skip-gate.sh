#!/usr/bin/env bash
# The SKIPPED gate: reads the file where the tests recorded the tests they
# skipped (tests/common: note_skip, CRC_SKIP_LOG) and lists them. With
# CI=true every test must run (CI is root on Debian with every package), so
# any skipped test fails the suite: a missing package or privilege can never
# turn into a silent pass.
# Usage: skip-gate.sh SKIP_LOG
set -euo pipefail
log=${1:?usage: skip-gate.sh SKIP_LOG}
n=0
[ -s "$log" ] && n=$(grep -c '^SKIPPED' "$log" || true)
if [ "$n" -eq 0 ]; then
  echo "skip gate: no test skipped"
  exit 0
fi
echo "skip gate: $n test(s) skipped:"
sed 's/^/  /' "$log"
if [ "${CI:-}" = "true" ]; then
  echo "skip gate: CI=true and $n test(s) printed SKIPPED; on CI every test must run" >&2
  exit 1
fi
