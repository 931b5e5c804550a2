#!/usr/bin/env bash
# bench/tftp.sh - TFTP throughput of crc-appliance vs tftpd-hpa (in.tftpd) in
# ONE run: N downloads of ipxe.efi (Debian `ipxe`) with curl, sequentially
# and 4 in parallel, with blksize 512 and 1468, cells interleaved between
# the two servers. Standalone: the shared harness has no TFTP area, but this
# follows its rules (scratch dir removed on exit, servers started in the
# foreground and stopped BY PID, server and client pinned to different
# cores, loopback only, every loop bounded in count and time).
#
#   sudo bench/tftp.sh                 # N=200 per cell, 60 s cap per cell
#   N=40 LIMIT_S=20 bench/tftp.sh      # quick run
#
# Env: N (downloads per cell), LIMIT_S (time cap per cell), REPS (rounds),
# CRC_BIN (default: $CARGO_TARGET_DIR or target/, release build),
# SUT_CPU=0 CLIENT_CPU=1, FILE (default /usr/lib/ipxe/ipxe.efi).
# Needs: curl, tftpd-hpa (in.tftpd; its system service need not run),
# ipxe, taskset (util-linux). Root only because in.tftpd wants to drop
# privileges to the `tftp` user.
set -euo pipefail

N=${N:-200}
LIMIT_S=${LIMIT_S:-60}
REPS=${REPS:-1}
SUT_CPU=${SUT_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
FILE=${FILE:-/usr/lib/ipxe/ipxe.efi}
repo=$(cd "$(dirname "$0")/.." && pwd)
CRC_BIN=${CRC_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/crc-appliance}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FATAL: $*"; exit 1; }
for t in curl in.tftpd taskset sha256sum; do
  command -v "$t" >/dev/null || die "missing $t (apt-get install curl tftpd-hpa util-linux)"
done
[[ -x $CRC_BIN ]] || die "no release binary at $CRC_BIN (cargo build --release)"
[[ -r $FILE ]] || die "no $FILE (apt-get install ipxe)"

PIDS=()
W=$(mktemp -d -t crcbench-tftp.XXXXXX)
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
chmod 755 "$W"
mkdir -p "$W/root" "$W/out"
cp -L "$FILE" "$W/root/ipxe.efi"
chmod 644 "$W/root/ipxe.efi"
SIZE=$(stat -c %s "$W/root/ipxe.efi")
WANT=$(sha256sum <"$W/root/ipxe.efi" | cut -d' ' -f1)

# Two free loopback ports (bound by nobody else right now).
free_port() { python3 -c 'import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
CRC_PORT=$(free_port)
HPA_PORT=$(free_port)

cat >"$W/cluster.yaml" <<EOF
name: bench
baseDomain: crc.testing
network: { cidr: 127.0.20.0/24, gateway: 127.0.20.1, applianceIP: 127.0.20.1 }
nodes:
  - { name: master-0, role: master, mac: "52:54:00:14:00:0a", ip: 127.0.20.10 }
dns: { enabled: false }
dhcp: { enabled: false }
loadBalancer: { enabled: false }
http: { enabled: false }
admin: { enabled: false }
pxe: { tftpListen: "127.0.0.1:$CRC_PORT", tftpRoot: "$W/root" }
EOF
RUST_LOG=warn taskset -c "$SUT_CPU" "$CRC_BIN" serve --cluster "$W/cluster.yaml" >"$W/crc.log" 2>&1 &
CRC_PID=$!
PIDS+=("$CRC_PID")
taskset -c "$SUT_CPU" in.tftpd --foreground --listen --address "127.0.0.1:$HPA_PORT" \
  --secure "$W/root" >"$W/hpa.log" 2>&1 &
HPA_PID=$!
PIDS+=("$HPA_PID")
sleep 1
kill -0 "$CRC_PID" || die "crc-appliance did not start: $(cat "$W/crc.log")"
kill -0 "$HPA_PID" || die "in.tftpd did not start: $(cat "$W/hpa.log")"

# utime+stime of the server process. Only meaningful for crc-appliance:
# in.tftpd forks one child per transfer and does not wait for them, so their
# CPU never reaches the parent's counters (printed as n/a).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# one TARGET PORT BLKSIZE OUT: one download, checked once per cell.
one() {
  taskset -c "$CLIENT_CPU" curl -sS --max-time 30 --tftp-blksize "$3" \
    -o "$4" "tftp://127.0.0.1:$2/ipxe.efi"
}

# cell TARGET PORT PID BLKSIZE PAR -> "seconds downloads cpu_ms"
cell() {
  local target=$1 port=$2 pid=$3 blk=$4 par=$5
  local per=$(( N / par )) t0 t1 c0 c1 done_n=0 w
  one "$target" "$port" "$blk" "$W/out/check" || die "$target: download failed"
  [[ $(sha256sum <"$W/out/check" | cut -d' ' -f1) == "$WANT" ]] || die "$target: wrong bytes"
  c0=$(cpu_ticks "$pid")
  t0=$(date +%s.%N)
  for (( w = 0; w < par; w++ )); do
    (
      local i start=$SECONDS
      for (( i = 0; i < per && SECONDS - start < LIMIT_S; i++ )); do
        one "$target" "$port" "$blk" "$W/out/w$w" || exit 1
        echo x >>"$W/out/count$w"
      done
    ) &
  done
  wait
  t1=$(date +%s.%N)
  c1=$(cpu_ticks "$pid")
  for (( w = 0; w < par; w++ )); do
    done_n=$(( done_n + $(wc -l <"$W/out/count$w") ))
    rm -f "$W/out/count$w"
  done
  echo "$(echo "$t1 - $t0" | bc -l) $done_n $(( (c1 - c0) * 1000 / $(getconf CLK_TCK) ))"
}

printf 'file ipxe.efi %d bytes, N=%d per cell, cap %ss, reps %d, server cpu %s, client cpu %s\n' \
  "$SIZE" "$N" "$LIMIT_S" "$REPS" "$SUT_CPU" "$CLIENT_CPU"
printf '%-5s %-4s %-8s %6s %9s %9s %10s\n' mode blk target files "files/s" "MB/s" "cpu ms/dl"
declare -A RATE
for (( rep = 1; rep <= REPS; rep++ )); do
  for par in 1 4; do
    for blk in 512 1468; do
      for t in crc hpa; do
        if [[ $t == crc ]]; then r=$(cell crc "$CRC_PORT" "$CRC_PID" "$blk" "$par")
        else r=$(cell hpa "$HPA_PORT" "$HPA_PID" "$blk" "$par"); fi
        read -r secs n cpu <<<"$r"
        rate=$(echo "$n / $secs" | bc -l)
        RATE[$t-$par-$blk]=$rate
        printf '%-5s %-4s %-8s %6d %9.1f %9.2f %10.2f\n' \
          "$([[ $par == 1 ]] && echo seq || echo par4)" "$blk" \
          "$([[ $t == crc ]] && echo crc || echo tftpd-hpa)" "$n" "$rate" \
          "$(echo "$rate * $SIZE / 1000000" | bc -l)" \
          "$([[ $t == crc ]] && echo "$cpu / $n" | bc -l || echo nan)"
      done
    done
  done
  printf 'ratios crc/tftpd-hpa (files/s), round %d:' "$rep"
  for par in 1 4; do
    for blk in 512 1468; do
      printf ' %s/%s=%.2f' "$([[ $par == 1 ]] && echo seq || echo par4)" "$blk" \
        "$(echo "${RATE[crc-$par-$blk]} / ${RATE[hpa-$par-$blk]}" | bc -l)"
    done
  done
  echo
done
