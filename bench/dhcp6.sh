#!/usr/bin/env bash
# bench/dhcp6.sh - crc-appliance's DHCPv6 server against Kea (kea-dhcp6) in
# ONE run, rounds interleaved, with Kea's perfdhcp -6 as the client.
#
# SETUP: two network namespaces made here and deleted on exit, joined by a
#   veth pair created inside them (nothing in the host namespace, no route
#   out): server fd00:99::1/64, client fd00:99::2/64 (the relay). 200
#   reservations 02:cb:00:00:00:01..c8 -> fd00:99::10..d7 (by MAC: crc's
#   nodes[].ipv6, Kea's hw-address reservations), DNS fd00:99::1, lifetime
#   1 h, bindings persisted to a file (Kea memfile, crc's binding file).
# THE CLIENT IS A RELAY (perfdhcp -A1): every message is a Relay-Forward
#   from fd00:99::2 (link-address = peer-address = fd00:99::2, no option
#   79) unicast to fd00:99::1, carrying a DUID-LL of one of the 200 reserved
#   MACs (-M). Since issue #40 crc takes a MAC from a DUID only behind a
#   relay listed in dhcp.relays (on its own link it reads the frame's
#   Ethernet source, and perfdhcp's frames all carry the client's one MAC),
#   so crc lists fd00:99::2 in dhcp.relays; Kea gets the same relay in the
#   subnet's relay.ip-addresses (it matches the link-address) and reads the
#   hardware address from the DUID, and listens on the unicast address
#   (interfaces "crcb6s/fd00:99::1"). Both serve the reservation by MAC as
#   in a real relay deployment. (Before #40 the client sent the DUID-LLs on
#   the link directly: those runs are not comparable with relayed ones.)
# MEASURES per round and per server (fresh server, empty binding file):
#   perfdhcp -6 -A1 -M macs at RATE/s for PERF_S s, in two modes:
#     sarr    Solicit -> Advertise, Request -> Reply: the 4-way exchange
#             that binds (Replies/s = bindings/s)
#     sa      Solicit -> Advertise only (-i): the decision without a binding
#   answers/s received (Replies, or Advertises for sa), drops %, and the
#   server's CPU time (utime+stime of its process tree) per exchange (us).
#   Rapid Commit (Solicit -> Reply) is not measured: perfdhcp 2.2.0's -i -c
#   aborts with "Packets exchange not specified" as soon as a Reply
#   arrives (tests/dhcp6.rs covers Rapid Commit's correctness instead).
# CHECKS (exit 1 at the end, naming the rows): a row where a server gave
#   0 or no answers/s (a bench that measures nothing must not report a
#   figure), and after each sarr row a binding file (crc's, Kea's memfile)
#   with no binding or with an address that is not the reservation of the
#   MAC in the binding's DUID-LL (the servers have no pool: every address
#   handed out must be a reservation, by MAC).
# The machine may be shared: prefer CPU per exchange to rates and delays.
#
#   sudo bench/dhcp6.sh                      # crc + kea, REPS=3
#   REPS=1 PERF_S=5 RATES='2000' bench/dhcp6.sh
#   TARGETS=kea bench/dhcp6.sh               # one server only (CRC_BIN, KEA_DHCP6)
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
TARGETS=${TARGETS:-crc kea}
RELAY=fd00:99::2
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
ip -n "$NS_C" addr add "$RELAY/64" dev "$IF_C" nodad
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
    echo "  relays: ['$RELAY']"
  } >"$W/crc.yaml"
}
gen_kea() {
  mkdir -p "$W/kea"; rm -f "$W/kea/"leases6*
  python3 - "$W/res.csv" "$W/kea" "$IF_S" "$RELAY" >"$W/kea/kea-dhcp6.json" <<'PY'
import json, sys
res = [dict(zip(("hw-address", "ip"), l.strip().split(",")[:2])) for l in open(sys.argv[1]) if l.strip()]
print(json.dumps({"Dhcp6": {
  "interfaces-config": {"interfaces": [sys.argv[3] + "/fd00:99::1"]},
  "lease-database": {"type": "memfile", "persist": True, "name": sys.argv[2] + "/leases6.csv", "lfc-interval": 0},
  "host-reservation-identifiers": ["hw-address", "duid"],
  "server-id": {"type": "LL", "persist": False},
  "preferred-lifetime": 3600, "valid-lifetime": 3600, "renew-timer": 1800, "rebind-timer": 2880,
  "option-data": [{"name": "dns-servers", "data": "fd00:99::1"}, {"name": "domain-search", "data": "bench6.example.com"}],
  "subnet6": [{"id": 1, "subnet": "fd00:99::/64", "relay": {"ip-addresses": [sys.argv[4]]}, "rapid-commit": True,
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
    perfdhcp -6 -A1 -l "$IF_C" "${flags[@]}" -M "$W/macs.txt" -r "$rate" -p "$PERF_S" -W 500000 fd00:99::1 >"$o" 2>&1 || true
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
  if [[ -z $replies || $replies == 0 ]]; then
    FAILED+=("$t $mode @$rate rep $rep: no answers (perfdhcp's output and the server log above)")
    tail -25 "$o" >&2; tail -5 "$W/$t.log" >&2
  fi
}
check_bindings() { # TARGET MODE RATE REP, after the server stopped
  local t=$1 f why
  [[ $2 == sarr ]] || return 0
  if [[ $t == crc ]]; then f="$W/crc-leases-v6.json"; else f="$W/kea/leases6.csv"; fi
  if why=$(python3 - "$t" "$f" "$W/res.csv" 2>&1 <<'PY'
import csv, json, sys
target, path, res = sys.argv[1:]
want = {l.split(",")[0]: l.split(",")[1] for l in open(res) if l.strip()}
def mac_of_duid(d):  # DUID-LL: type 3, htype 1, MAC
    h = d.replace(":", "").lower()
    return ":".join(h[i:i + 2] for i in range(8, 20, 2)) if h.startswith("00030001") and len(h) == 20 else None
try:
    if target == "crc":
        rows = [(b["addr"], b["duid"]) for b in json.load(open(path))["bindings"]]
    else:
        rows = [(r["address"], r["duid"]) for r in csv.DictReader(open(path)) if r["address"]]
except (OSError, ValueError, KeyError) as e:
    sys.exit(f"no readable binding file {path}: {e}")
bad = [(a, d) for a, d in rows if want.get(mac_of_duid(d) or "") != a]
if not rows:
    sys.exit(f"no binding in {path}")
if bad:
    sys.exit(f"{len(rows)} bindings, {len(bad)} not the reservation of their DUID-LL's MAC, e.g. {bad[:3]}")
print(f"{len({a for a, _ in rows})} reserved addresses bound, each to its MAC")
PY
  ); then log "$t $2 @$3 rep $4: $why"
  else FAILED+=("$t $2 @$3 rep $4: bindings: $why"); log "$t $2 @$3 rep $4: BAD bindings: $why"
  fi
}
FAILED=()
log "load: $(cut -d' ' -f1-3 /proc/loadavg); results $OUT"
for ((rep=1; rep<=REPS; rep++)); do
  for t in $TARGETS; do
    for mode in sarr sa; do
      for r in $RATES; do
        start "$t"; perf "$t" "$mode" "$r" "$rep"; stop "$SRV_PID"; SRV_PID=
        check_bindings "$t" "$mode" "$r" "$rep"
      done
    done
  done
done
{ echo "kea-dhcp6 $("$KEA" -v)"; echo "perfdhcp $(perfdhcp -v 2>&1 | head -1)"; echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"; } >>"$OUT.versions"
column -t -s$'\t' "$OUT"
if ((${#FAILED[@]})); then
  printf 'FAILED: %s\n' "${FAILED[@]}" >&2
  echo "bench/dhcp6.sh: ${#FAILED[@]} row(s) failed: the figures above are not a measurement" >&2
  exit 1
fi
