#!/usr/bin/env bash
# bench/dhcp.sh - crc-appliance's DHCP server side by side with Kea and
# dnsmasq in ONE run of the shared harness (shared/bench/dhcp.sh):
# 200 MAC reservations, scripted DORA correctness + latency, perfdhcp rates.
#
#   sudo bench/dhcp.sh                  # crc + kea + dnsmasq
#   REPS=1 PERF_S=5 bench/dhcp.sh       # quick run
#   bench/dhcp.sh kea                   # extra args replace the peer list
#
# Needs root, cargo build --release, and the packages kea-dhcp4-server,
# kea-admin (perfdhcp), dnsmasq, iproute2, python3 (see shared/bench/README.md).
# The shared harness is looked up at ../../shared/bench relative to this
# repo (the repo's parent holds shared/), or at $SHARED_BENCH.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
run_area dhcp "{iface} {server_ip} {prefix} {subnet} {pool_start} {pool_end} {router} {domain} {lease_s} {reservations} {workdir}" "kea dnsmasq" "$@"
