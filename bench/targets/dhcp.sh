#!/usr/bin/env bash
# bench/targets/dhcp.sh - run crc-appliance as a custom target of the shared
# DHCP harness (shared/bench/dhcp.sh). Runs INSIDE the harness's server
# network namespace; turns the harness placeholders into a cluster file with
# only DHCP enabled and execs the release binary (so the harness tracks the
# server's own PID and stops it with SIGTERM).
#
# Usage (as the harness calls it):
#   dhcp.sh IFACE SERVER_IP PREFIX SUBNET POOL_START POOL_END ROUTER DOMAIN LEASE_S RESERVATIONS_CSV WORKDIR
# Env: CRC_BIN (default: target/release/crc-appliance of this repo),
#      CRC_POOL=1 to give the harness's pool to unknown MACs (default: off,
#      reservations only, which is what a UPI cluster uses),
#      CRC_CHECK=1 to run `check` on the generated file instead of serving,
#      CRC_RELAYS="ip …" the relays to declare in dhcp.relays (default: the
#      harness's client address, 10.99.0.2 in shared/bench/dhcp.sh: perfdhcp
#      always sends as a relay agent with giaddr = its own address, and a
#      relay that is neither a segment gateway nor in dhcp.relays is
#      dropped, as it must be; without it perfdhcp got 0 leases/s).
set -euo pipefail
[[ $# -eq 11 ]] || { echo "usage: $0 IFACE SERVER_IP PREFIX SUBNET POOL_START POOL_END ROUTER DOMAIN LEASE_S RESERVATIONS WORKDIR" >&2; exit 2; }
IFACE=$1 SERVER_IP=$2 PREFIX=$3 SUBNET=$4 POOL_START=$5 POOL_END=$6 ROUTER=$7 DOMAIN=$8 LEASE_S=$9
RES=${10} WORK=${11}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${CRC_BIN:-$REPO/target/release/crc-appliance}
[[ -x $BIN ]] || { echo "no $BIN: run cargo build --release first" >&2; exit 1; }

# The cluster name/baseDomain must make <name>.<baseDomain> = DOMAIN.
NAME=${DOMAIN%%.*}
BASE=${DOMAIN#*.}
F=$WORK/crc-dhcp-cluster.yaml
{
  echo "name: $NAME"
  echo "baseDomain: $BASE"
  echo "network:"
  echo "  cidr: $SUBNET"
  echo "  gateway: $ROUTER"
  echo "  applianceIP: $SERVER_IP"
  echo "  interface: $IFACE"
  echo "nodes:"
  # mac,ip,hostname: the first is a master, the rest workers.
  awk -F, 'NF >= 2 && $1 != "" {
      role = (n++ == 0) ? "master" : "worker"
      name = ($3 != "") ? $3 : sprintf("node-%d", n)
      printf "  - { name: %s, role: %s, mac: \"%s\", ip: %s }\n", name, role, $1, $2
  }' "$RES"
  echo "dns: { enabled: false }"
  echo "loadBalancer: { enabled: false }"
  echo "http: { enabled: false }"
  echo "admin: { enabled: false }"
  echo "dhcp:"
  echo "  listen: 0.0.0.0:67"
  echo "  leaseTime: ${LEASE_S}s"
  echo "  leaseFile: $WORK/crc-dhcp-leases.json"
  echo "  relays: [$(echo "${CRC_RELAYS:-10.99.0.2}" | tr -s ' ' ',' | sed 's/^,//; s/,$//')]"
  if [[ ${CRC_POOL:-0} == 1 ]]; then
    echo "  pool: { start: $POOL_START, end: $POOL_END }"
  fi
} >"$F"
rm -f "$WORK/crc-dhcp-leases.json"
# (The harness's router and server are one address; the cluster file
# allows gateway == applianceIP.)
[[ ${CRC_CHECK:-0} == 1 ]] && exec "$BIN" check --cluster "$F"
exec "$BIN" serve --cluster "$F"
