#!/usr/bin/env bash
# The whole test suite: installs missing system packages, checks formatting
# and lints, then runs every test. Tests that need root, network namespaces
# or /dev/kvm print "SKIPPED <test>: <why>" when those are unavailable.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/prereqs.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# Hosts that only want DNS/DHCP/LB/HTTP build without libvirt.
cargo clippy --no-default-features --all-targets -- -D warnings
cargo test --workspace --all-targets --no-fail-fast -- --test-threads="${TEST_THREADS:-4}"
