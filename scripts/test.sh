#!/usr/bin/env bash
# The whole test suite: installs missing system packages, checks formatting
# and lints, then runs every test binary (scripts/run-tests.sh: built once,
# TEST_JOBS of them at a time, default 3). Tests that need root, network namespaces
# or /dev/kvm print "SKIPPED <test>: <why>" when those are unavailable; they
# are listed at the end, and with CI=true any of them fails the suite
# (scripts/skip-gate.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/prereqs.sh
./scripts/test-tools.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# Hosts that only want DNS/DHCP/LB/HTTP build without libvirt.
cargo clippy --no-default-features --all-targets -- -D warnings
CRC_SKIP_LOG=$(mktemp)
# Where each test ran its appliance (tests/common: note_harness).
CRC_HARNESS_LOG=$(mktemp)
export CRC_SKIP_LOG CRC_HARNESS_LOG
trap 'rm -f "$CRC_SKIP_LOG" "$CRC_HARNESS_LOG"' EXIT
rc=0
./scripts/run-tests.sh || rc=$?
# Kept for `scripts/harness-count.sh target/harness.log target/test-counts.tsv --by-binary`.
cp "$CRC_HARNESS_LOG" "${CARGO_TARGET_DIR:-target}/harness.log" 2>/dev/null || true
./scripts/harness-count.sh "$CRC_HARNESS_LOG" "${CARGO_TARGET_DIR:-target}/test-counts.tsv"
./scripts/skip-gate.sh "$CRC_SKIP_LOG" || rc=1
exit "$rc"
