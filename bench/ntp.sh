#!/usr/bin/env bash
# bench/ntp.sh - NTP server-mode throughput and CPU per request of
# crc-appliance vs chronyd (`allow`, `local stratum 10`) in ONE run, cells
# interleaved. Standalone (the shared harness has no NTP area) but by its
# rules: scratch dir removed on exit, servers stopped BY PID, loopback only,
# server and client pinned to different cores, every loop bounded in count
# and time.
#
#   sudo bench/ntp.sh                 # N=50000 requests per cell, 30 s cap
#   N=5000 LIMIT_S=10 bench/ntp.sh    # quick run
#
# Env: N (requests per cell), LIMIT_S (time cap per cell), REPS (rounds),
# WINDOW (requests in flight), CRC_BIN (default: release build),
# CHRONYD (default: the extracted test copy, else chronyd on PATH),
# SUT_CPU=0 CLIENT_CPU=1.
# Measures: requests/s answered (the client: bench/ntp_load.py) and the
# server's CPU time per answered request (utime+stime from /proc/PID/stat
# around the cell). Root: chronyd wants it (run with -x: it never touches
# the clock). The appliance runs with clientRate 100000 (burst 200000: no limit in practice),
# chronyd without `ratelimit` (its default), so both answer everything.
set -euo pipefail

N=${N:-50000}
LIMIT_S=${LIMIT_S:-30}
REPS=${REPS:-3}
WINDOW=${WINDOW:-32}
SUT_CPU=${SUT_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
repo=$(cd "$(dirname "$0")/.." && pwd)
CRC_BIN=${CRC_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/crc-appliance}
CHRONYD=${CHRONYD:-/var/cache/crc-appliance-tests/extract/chrony/usr/sbin/chronyd}
[[ -x $CHRONYD ]] || CHRONYD=$(command -v chronyd || true)

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FATAL: $*"; exit 1; }
[[ -x $CRC_BIN ]] || die "no binary at $CRC_BIN (cargo build --release)"
[[ -n $CHRONYD && -x $CHRONYD ]] || die "no chronyd (scripts/prereqs.sh extracts it)"
command -v taskset >/dev/null || die "missing taskset (util-linux)"

PIDS=()
W=$(mktemp -d -t crcbench-ntp.XXXXXX)
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
CRC_PORT=$(free_port)
CHR_PORT=$(free_port)
ADMIN_PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')

cat >"$W/cluster.yaml" <<YAML
name: bench
baseDomain: crc.testing
network: { cidr: 127.0.30.0/24, gateway: 127.0.30.1, applianceIP: 127.0.30.1 }
nodes:
  - { name: master-0, role: master, mac: "52:54:00:1e:00:0a", ip: 127.0.30.10 }
dns: { enabled: false }
dhcp: { enabled: false }
loadBalancer: { enabled: false }
http: { enabled: false }
admin: { listen: "127.0.0.1:$ADMIN_PORT" }
ntp:
  listen: "127.0.0.1:$CRC_PORT"
  localStratum: 10
  clientRate: 100000
YAML
cat >"$W/chrony.conf" <<CONF
port $CHR_PORT
bindaddress 127.0.0.1
allow 127.0.0.1
local stratum 10
cmdport 0
pidfile $W/chronyd.pid
CONF

RUST_LOG=info taskset -c "$SUT_CPU" "$CRC_BIN" serve --cluster "$W/cluster.yaml" >"$W/crc.log" 2>&1 &
CRC_PID=$!; PIDS+=("$CRC_PID")
taskset -c "$SUT_CPU" "$CHRONYD" -x -d -u root -f "$W/chrony.conf" >"$W/chronyd.log" 2>&1 &
CHR_PID=$!; PIDS+=("$CHR_PID")
for _ in $(seq 100); do
  grep -q "listening for ntp" "$W/crc.log" && break
  sleep 0.1
done
grep -q "listening for ntp" "$W/crc.log" || { cat "$W/crc.log" >&2; die "crc-appliance did not start"; }
sleep 1
kill -0 "$CHR_PID" || { cat "$W/chronyd.log" >&2; die "chronyd did not start"; }

cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)

cell() { # name pid port
  local name=$1 pid=$2 port=$3 c0 c1 out
  c0=$(cpu_ticks "$pid")
  out=$(taskset -c "$CLIENT_CPU" timeout $((LIMIT_S + 10)) python3 "$repo/bench/ntp_load.py" 127.0.0.1 "$port" "$N" "$WINDOW" "$LIMIT_S")
  c1=$(cpu_ticks "$pid")
  # out: answered seconds
  read -r answered secs <<<"$out"
  python3 - "$name" "$answered" "$secs" "$c0" "$c1" "$HZ" <<'PY'
import sys
name, ans, secs, c0, c1, hz = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
cpu = (c1 - c0) / hz
print(f"{name:14} answered {ans:7d} in {secs:6.2f} s  {ans/secs:9.0f} req/s  server CPU {cpu:6.2f} s  {cpu/max(ans,1)*1e6:6.2f} us/req")
PY
}

log "crc-appliance $CRC_BIN (pid $CRC_PID, port $CRC_PORT); chronyd $CHRONYD (pid $CHR_PID, port $CHR_PORT)"
log "N=$N WINDOW=$WINDOW LIMIT_S=$LIMIT_S REPS=$REPS; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$REPS"); do
  cell "crc-appliance" "$CRC_PID" "$CRC_PORT"
  cell "chronyd" "$CHR_PID" "$CHR_PORT"
done
