#!/usr/bin/env bash
# bench/dhcp6.sh - crc-appliance's DHCPv6 server against Kea (kea-dhcp6) in
# ONE run, rounds interleaved, with Kea's perfdhcp -6 as the client.
#
# SETUP: two network namespaces made here and deleted on exit, joined by a
#   veth pair created inside them (nothing in the host namespace, no route
#   out): server fd00:99::1/64, client link-local only. 200 reservations
#   02:cb:00:00:00:01..c8 -> fd00:99::10..d7 (by MAC: crc's nodes[].ipv6,
#   Kea's hw-address reservations), DNS fd00:99::1, lifetime 1 h, bindings
#   persisted to a file (Kea memfile, crc's binding file).
# MEASURES per round and per server (fresh server, empty binding file):
#   perfdhcp -6 -M macs (DUID-LL of the 200 reserved MACs) at RATE/s for
#   PERF_S s, in two modes:
#     sarr    Solicit -> Advertise, Request -> Reply: the 4-way exchange
#             that binds (Replies/s = bindings/s)
#     sa      Solicit -> Advertise only (-i): the decision without a binding
#   answers/s received (Replies, or Advertises for sa), drops %, and the
#   server's CPU time (utime+stime of its process tree) per exchange (us).
#   Rapid Commit (Solicit -> Reply) is not measured: perfdhcp 2.2.0's -i -c
#   aborts with "Packets exchange not specified" as soon as a Reply
#   arrives (tests/dhcp6.rs covers Rapid Commit's correctness instead).
# The machine may be shared: prefer CPU per exchange to rates and delays.
#
#   sudo bench/dhcp6.sh                      # crc + kea, REPS=3
#   REPS=1 PERF_S=5 RATES='2000' bench/dhcp6.sh
#
# Needs root, cargo build --release, perfdhcp (kea-admin), kea-dhcp6 (on
# PATH or extracted by scripts/prereqs.sh into
# /var/cache/crc-appliance-tests/extract/kea-dhcp6-server), iproute2.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BIN=${CRC_BIN:-$REPO/target/release/crc-appliance}
KEA=${KEA_DHCP6:-$(command -v kea-dhcp6 || echo /var/cache/crc-appliance-tests/extract/kea-dhcp6-server/usr/sbin/kea-dhcp6)}
REPS=${REPS:-3}
PERF_S=${PERF_S:-10}
RATES=${RATES:-2000 8000}
SUT_CPU=${SUT_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
RESULTS_DIR=${RESULTS_DIR:-$REPO/bench/results}
[[ $(id -u) == 0 ]] || { echo "needs root (network namespaces, port 547)" >&2; exit 1; }
command -v perfdhcp >/dev/null || { echo "perfdhcp missing (kea-admin)" >&2; exit 1; }
[[ -x $KEA ]] || { echo "kea-dhcp6 missing ($KEA)" >&2; exit 1; }
[[ -x $BIN ]] || (cd "$REPO" && cargo build --release --bin crc-appliance)

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
NS_S="crcb6-s-$$"; NS_C="crcb6-c-$$"; IF_S=crcb6s; IF_C=crcb6c
W=$(mktemp -d -t crcbench-dhcp6.XXXXXX); chmod 755 "$W"
mkdir -p "$RESULTS_DIR"
STAMP=$(date +%Y%m%d-%H%M%S)
OUT="$RESULTS_DIR/dhcp6-$STAMP.tsv"
printf 'target\tmode\trate\trep\tanswers_per_s\tdrops_pct\tcpu_us_per_exchange\tavg_delay_ms\n' >"$OUT"
SRV_PID=
cleanup() {
  [[ -n "$SRV_PID" ]] && stop "$SRV_PID"
  ip netns del "$NS_C" 2>/dev/null || true
  ip netns del "$NS_S" 2>/dev/null || true
  [[ ${KEEP:-0} == 1 ]] && log "kept $W" || rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
stop() { # SIGTERM our own PID, wait, SIGKILL
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i=0; i<50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
descendants() { local p=$1 c; echo "$p"; for c in $(cat "/proc/$p/task/"*/children 2>/dev/null); do descendants "$c"; done; }
cpu_ticks() { local p t=0 v; for p in $(descendants "$1"); do v=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12+$13}'); t=$((t + ${v:-0})); done; echo "$t"; }
CLK_TCK=$(getconf CLK_TCK)

ip netns add "$NS_S"; ip netns add "$NS_C"
ip -n "$NS_S" link set lo up; ip -n "$NS_C" link set lo up
ip link add "$IF_S" netns "$NS_S" type veth peer name "$IF_C" netns "$NS_C"
for ns_if in "$NS_S:$IF_S" "$NS_C:$IF_C"; do
  ip netns exec "${ns_if%%:*}" sysctl -qw "net.ipv6.conf.${ns_if#*:}.accept_dad=0"
done
ip -n "$NS_S" addr add 10.99.0.1/24 dev "$IF_S"
ip -n "$NS_S" addr add fd00:99::1/64 dev "$IF_S" nodad
ip -n "$NS_S" link set "$IF_S" up; ip -n "$NS_C" link set "$IF_C" up
sleep 1

for i in $(seq 1 200); do printf '02:cb:00:00:00:%02x,fd00:99::%x,10.99.0.%d,node-%d\n' "$i" $((15+i)) $((9+i)) "$i"; done >"$W/res.csv"
cut -d, -f1 "$W/res.csv" >"$W/macs.txt"

gen_crc() {
  rm -f "$W"/crc-*.json
  {
    echo "name: bench6"; echo "baseDomain: example.com"
    echo "network:"; echo "  cidr: 10.99.0.0/24"; echo "  gateway: 10.99.0.1"; echo "  applianceIP: 10.99.0.1"
    echo "  interface: $IF_S"
    echo "  ipv6: { cidr: 'fd00:99::/64', applianceIP: 'fd00:99::1' }"
    echo "nodes:"
    awk -F, '{ printf "  - { name: %s, role: %s, mac: \"%s\", ip: %s, ipv6: \"%s\" }\n", $4, (NR==1?"master":"worker"), $1, $3, $2 }' "$W/res.csv"
    echo "dns: { enabled: false }"; echo "loadBalancer: { enabled: false }"
    echo "http: { enabled: false }"; echo "admin: { enabled: false }"
    echo "dhcp:"; echo "  leaseTime: 1h"; echo "  leaseFile: $W/crc-leases.json"
  } >"$W/crc.yaml"
}
gen_kea() {
  mkdir -p "$W/kea"; rm -f "$W/kea/"leases6*
  python3 - "$W/res.csv" "$W/kea" "$IF_S" >"$W/kea/kea-dhcp6.json" <<'PY'
import json, sys
res = [dict(zip(("hw-address", "ip"), l.strip().split(",")[:2])) for l in open(sys.argv[1]) if l.strip()]
print(json.dumps({"Dhcp6": {
  "interfaces-config": {"interfaces": [sys.argv[3]]},
  "lease-database": {"type": "memfile", "persist": True, "name": sys.argv[2] + "/leases6.csv", "lfc-interval": 0},
  "host-reservation-identifiers": ["hw-address", "duid"],
  "server-id": {"type": "LL", "persist": False},
  "preferred-lifetime": 3600, "valid-lifetime": 3600, "renew-timer": 1800, "rebind-timer": 2880,
  "option-data": [{"name": "dns-servers", "data": "fd00:99::1"}, {"name": "domain-search", "data": "bench6.example.com"}],
  "subnet6": [{"id": 1, "subnet": "fd00:99::/64", "interface": sys.argv[3], "rapid-commit": True,
               "reservations": [{"hw-address": r["hw-address"], "ip-addresses": [r["ip"]]} for r in res]}],
  "loggers": [{"name": "kea-dhcp6", "output_options": [{"output": "stdout"}], "severity": "WARN"}]}}, indent=1))
PY
}
start() {
  case $1 in
    crc) gen_crc
         ip netns exec "$NS_S" taskset -c "$SUT_CPU" "$BIN" serve --cluster "$W/crc.yaml" >"$W/crc.log" 2>&1 & ;;
    kea) gen_kea
         ip netns exec "$NS_S" taskset -c "$SUT_CPU" env KEA_PIDFILE_DIR="$W/kea" KEA_LOCKFILE_DIR="$W/kea" \
           "$KEA" -c "$W/kea/kea-dhcp6.json" >"$W/kea.log" 2>&1 & ;;
  esac
  SRV_PID=$!
  sleep 2
  kill -0 "$SRV_PID" 2>/dev/null || { tail -5 "$W/$1.log" >&2; exit 1; }
}
perf() { # perf TARGET MODE RATE REP
  local t=$1 mode=$2 rate=$3 rep=$4 o="$W/perf-$1-$2-$3-$4.txt" flags=(-d 2) c0 c1
  [[ $mode == sa ]] && flags=(-i)
  c0=$(cpu_ticks "$SRV_PID")
  ip netns exec "$NS_C" taskset -c "$CLIENT_CPU" timeout $((PERF_S + 20)) \
    perfdhcp -6 -l "$IF_C" "${flags[@]}" -M "$W/macs.txt" -r "$rate" -p "$PERF_S" -W 500000 >"$o" 2>&1 || true
  c1=$(cpu_ticks "$SRV_PID")
  local sect replies drops delay
  if [[ $mode == sa ]]; then sect="SOLICIT-ADVERTISE"; else sect="REQUEST-REPLY"; fi
  replies=$(awk -v s="$sect" '$0 ~ "Statistics for: "s {f=1} f && /received packets:/{print $3; exit}' "$o")
  drops=$(awk -v s="$sect" '$0 ~ "Statistics for: "s {f=1} f && /drops ratio:/{gsub("%","",$3); print $3; exit}' "$o")
  delay=$(awk -v s="$sect" '$0 ~ "Statistics for: "s {f=1} f && /avg delay:/{print $3; exit}' "$o")
  local per_s cpu
  per_s=$(python3 -c "print(round(${replies:-0}/$PERF_S,1))")
  cpu=$(python3 -c "print(round(($c1-$c0)/$CLK_TCK*1e6/max(${replies:-0},1),1))")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$mode" "$rate" "$rep" "$per_s" "${drops:-nan}" "$cpu" "${delay:-nan}" >>"$OUT"
  log "$t $mode @$rate rep $rep: $per_s answers/s, drops ${drops:-?}%, ${cpu} us CPU/exchange, delay ${delay:-?} ms"
}
log "load: $(cut -d' ' -f1-3 /proc/loadavg); results $OUT"
for ((rep=1; rep<=REPS; rep++)); do
  for t in crc kea; do
    for mode in sarr sa; do
      for r in $RATES; do
        start "$t"; perf "$t" "$mode" "$r" "$rep"; stop "$SRV_PID"; SRV_PID=
      done
    done
  done
done
{ echo "kea-dhcp6 $("$KEA" -v)"; echo "perfdhcp $(perfdhcp -v 2>&1 | head -1)"; echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"; } >>"$OUT.versions"
column -t -s$'\t' "$OUT"
