#!/usr/bin/env bash
# bench/pressure.sh - the resource-pressure fixes of #16 next to HAProxy and
# nginx in ONE run, cells interleaved (rep 1: crc peer..., rep 2: ...):
#
#  lb         LB descriptor exhaustion. crc-appliance and HAProxy each under
#             `prlimit --nofile=$NOFILE:$NOFILE` with four TCP frontends
#             (api, machine-config, ingress-http, ingress-https) over two
#             nginx backends (127.0.41.11/.12; TLS on the api, mc and https
#             ports, health checks HTTPS GET /readyz, /healthz, TCP connect,
#             TLS handshake; every 1 s, rise 2, fall 2 for both). $FLOOD_N
#             idle connections are opened and held on ingress-http only, then
#             for $MEASURE_S s: new HTTPS requests through the api frontend
#             (one new connection every 50 ms, 2 s timeout), the LB's own view
#             of its backends (admin /api/lb/backends; HAProxy `show stat`)
#             polled every 1 s, "Too many open files" lines in its log, and
#             (ss) how many flood connections the LB really holds on the
#             server side vs. what the flood client believes is open.
#             HAProxy twice: `haproxy` with its defaults (global maxconn
#             derived from ulimit-n, frontend maxconn = global) and
#             `haproxy-cap` with `maxconn` per frontend = the cap
#             crc-appliance scaled itself to (read from its log).
#  slowloris  HTTP slowloris. crc-appliance (http only, defaults:
#             maxConnectionsPerClient 64, 10 s header timeout) and nginx
#             (worker_processes 1, worker_connections 1024,
#             client_header_timeout default 60s). $SLOW_N connections from
#             127.0.0.2 send "GET /small.txt HTTP/1.1\r\nHost: x\r\n" and
#             nothing more, held $SLOW_S s; closed ones are reopened (at most
#             100/s, like a slowloris). Meanwhile 127.0.0.3 fetches /small.txt
#             every 200 ms on a new connection (5 s timeout).
#  ignition   a ${IGN_MB} MB ignition-like JSON; $IGN_PAR parallel curl fetches,
#             $IGN_ROUNDS rounds per server start: peak VmRSS growth over the
#             RSS right after start (server + descendants, 20 ms samples),
#             the absolute peak, and server CPU time (utime+stime) per
#             request; for crc also its RSS at start with an empty ignitionDir
#             (its start-up preflight parses <role>.ign).
#  tftphog   TFTP slot hogging (audit D4, #22). crc-appliance (pxe only,
#             defaults: maxTransfers 64, maxTransfersPerClient 4, timeout
#             1 s, retries 5) and tftpd-hpa (in.tftpd --listen, defaults: one
#             process per transfer, no cap). 127.0.0.2 sends $HOG_BURST read
#             requests for undionly.kpxe every 5 s (each from its own port,
#             never ACKed) for $HOG_S s; meanwhile 127.0.0.3 starts one
#             lock-step download of the same file every 1 s, $LEGIT_N in all
#             (each given up after 10 s). With CRC_BEFORE_BIN (a build of
#             an older commit) also the target crc-before, in the same run.
#  h2idle     idle HTTP/2 (#22): $H2_N connections spread over $H2_SRCS source
#             addresses (127.0.5.x), each sending the h2c preface and an empty
#             SETTINGS frame and then nothing (never ACKing, never answering
#             a PING), opened at 500/s and held $H2_S s. crc: its one port
#             (HTTP/1 and h2c); nginx: a second `listen ... http2` port (h2c
#             prior knowledge) in the same server and worker, so both share
#             the 1024 worker_connections. Meanwhile 127.0.0.3 fetches
#             /small.txt over HTTP/1.1 every 0.5 s for 8 s (3 s timeout).
#             Recorded: the probe's success, the flood connections the
#             server closed (and after how long), those still open at the end.
#  slowmulti  slowloris from many addresses (#22): $MULTI_N connections spread
#             over $MULTI_SRCS addresses (127.0.6.x), each sending
#             "GET /small.txt HTTP/1.1\r\nHost: x\r\n" and nothing more, held
#             $SLOW_S s, closed ones reopened (at most 100/s); the probe as in
#             slowloris.
#  nofile     a low open-files limit (#22): crc with a 7-node cluster, the LB
#             at its default 10000 per frontend (4 frontends, no backends up),
#             DNS and HTTP, and nginx (worker_connections 1024), both under
#             `prlimit --nofile=$NOFILE:$NOFILE`. 10 connections from 127.0.0.2
#             send a partial head and stall (reopened, the audit's D7 repro),
#             127.0.0.3 fetches /small.txt every 0.5 s for 10 s (3 s timeout).
#             For crc also the caps it chose (its start-up line).
#  ignnodes   the ${IGN_MB} MB file fetched by three masters at once (#22): crc
#             merges /ignition/master-N.ign (role file + the node's
#             /etc/hostname) for master-0/1/2, each curl from the node's own
#             address; nginx serves the static file to the same three
#             clients. Peak RSS growth and CPU, as in ignition.
#  dnslog     DNS log flood (#22 item 6). crc-appliance (dns only, RUST_LOG
#             unset: the default `info`) and Knot (`log: stderr, any: info`,
#             Knot's default severity), each answering one zone on
#             127.0.43.x:15353. Per kind of bad datagram ($DNSLOG_KINDS:
#             opcode = a query with opcode 2 STATUS, edns = EDNS version 1,
#             garbage = random bytes with QR=0) $DNSLOG_N datagrams from
#             127.0.0.2 (bursts of 100, 10 ms apart), then $DNSLOG_SETTLE s
#             (crc writes its summary line 10 s after the first): the log
#             lines and bytes added, the lines naming 127.0.0.2, the
#             datagrams answered. With CRC_BEFORE_BIN set, that binary (an
#             older build) runs first as target crc-before.
#
# Standalone (the shared harness has no such scenarios) but it follows its
# rules: scratch dir removed on exit, every process started here is tracked
# and stopped BY PID (trap), servers pinned to SUT_CPU and clients to
# CLIENT_CPU, loopback (127.0.0.0/8) only, every loop and client bounded in
# count and time. One TSV row per measurement in $RESULTS_DIR (git-ignored).
#
#   bench/pressure.sh                            # all scenarios, REPS=3
#   REPS=1 SCENARIOS=slowloris bench/pressure.sh
#
# Env: REPS (3) SCENARIOS ("lb slowloris ignition tftphog h2idle slowmulti
# nofile ignnodes dnslog") HAPROXY_VARIANTS ("default cap") NOFILE (1024)
# FLOOD_N (1500) MEASURE_S (10) SLOW_N (1100) SLOW_S (15) H2_N (1024)
# H2_SRCS (16) H2_S (25) MULTI_N (1280) MULTI_SRCS (20) IGN_MB (50)
# IGN_PAR (8) IGN_ROUNDS (3) HOG_BURST (70) HOG_S (40) LEGIT_N (28)
# DNSLOG_N (3000) DNSLOG_KINDS ("opcode edns garbage") DNSLOG_SETTLE (11)
# SUT_CPU (0) CLIENT_CPU (1) KEEP (1 keeps the scratch dir) RESULTS_DIR
# CRC_BIN CRC_BEFORE_BIN (tftphog and dnslog only).
# Needs: nginx haproxy openssl curl python3 taskset prlimit ss (iproute2);
# tftphog also in.tftpd (tftpd-hpa; its system service need not run),
# dnslog knotd (knot).
# Root is not required (ports above 1024; prlimit only lowers limits),
# except by in.tftpd, which wants to drop privileges (tftphog only).
set -euo pipefail

REPS=${REPS:-3}
SCENARIOS=${SCENARIOS:-lb slowloris ignition tftphog h2idle slowmulti nofile ignnodes dnslog}
HAPROXY_VARIANTS=${HAPROXY_VARIANTS:-default cap}
NOFILE=${NOFILE:-1024}
FLOOD_N=${FLOOD_N:-1500}
MEASURE_S=${MEASURE_S:-10}
SLOW_N=${SLOW_N:-1100}
SLOW_S=${SLOW_S:-15}
H2_N=${H2_N:-1024}
H2_SRCS=${H2_SRCS:-16}
H2_S=${H2_S:-25}
MULTI_N=${MULTI_N:-1280}
MULTI_SRCS=${MULTI_SRCS:-20}
IGN_MB=${IGN_MB:-50}
IGN_PAR=${IGN_PAR:-8}
IGN_ROUNDS=${IGN_ROUNDS:-3}
HOG_BURST=${HOG_BURST:-70}
HOG_S=${HOG_S:-40}
LEGIT_N=${LEGIT_N:-28}
DNSLOG_N=${DNSLOG_N:-3000}
DNSLOG_KINDS=${DNSLOG_KINDS:-opcode edns garbage}
DNSLOG_SETTLE=${DNSLOG_SETTLE:-11}
SUT_CPU=${SUT_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
repo=$(cd "$(dirname "$0")/.." && pwd)
CRC_BIN=${CRC_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/crc-appliance}
HELPER=$repo/bench/pressure.py
RESULTS_DIR=${RESULTS_DIR:-$repo/bench/results}
CLK_TCK=$(getconf CLK_TCK)

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FATAL: $*"; exit 1; }
# Tools per scenario: tftphog alone needs neither nginx nor HAProxy.
NEED="curl python3 taskset prlimit timeout ss"
[[ " $SCENARIOS " == *" lb "* ]] && NEED+=" nginx haproxy openssl"
for s in slowloris ignition h2idle slowmulti nofile ignnodes; do
  [[ " $SCENARIOS " == *" $s "* ]] && NEED+=" nginx openssl"
done
[[ " $SCENARIOS " == *" tftphog "* ]] && NEED+=" in.tftpd"
for t in $NEED; do
  command -v "$t" >/dev/null || die "missing $t (apt-get install nginx haproxy openssl curl python3 util-linux coreutils iproute2 tftpd-hpa)"
done
[[ -x $CRC_BIN ]] || die "no release binary at $CRC_BIN (cargo build --release)"

STAMP=$(date +%Y%m%d-%H%M%S)
mkdir -p "$RESULTS_DIR/raw/pressure-$STAMP"
RAW=$RESULTS_DIR/raw/pressure-$STAMP
RESULTS=$RESULTS_DIR/pressure-$STAMP.tsv
printf 'area\ttarget\tscenario\tmetric\trep\tvalue\tunit\n' >"$RESULTS"

PIDS=()
W=$(mktemp -d -t crcbench-pressure.XXXXXX)
chmod 755 "$W"

# stop_pid PID: SIGTERM, up to 5 s, then SIGKILL. Only PIDs started here.
stop_pid() {
  local pid=$1 i out=() p
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null || true
  for p in "${PIDS[@]}"; do [[ $p == "$pid" ]] || out+=("$p"); done
  PIDS=("${out[@]}")
}
# wait_pid PID SECONDS: let a tracked process end by itself, then stop it.
wait_pid() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  stop_pid "$1"
}
cleanup() {
  local i
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[$i]}"; done
  find "$RAW" -type f -exec sed -i -e "s#$W#<workdir>#g" -e "s#$repo#<repo>#g" {} + 2>/dev/null || true
  if [[ ${KEEP:-0} == 1 ]]; then log "kept $W"; else rm -rf "$W"; fi
  if [[ -s $RESULTS ]]; then
    cp "$RESULTS" "$RESULTS_DIR/pressure-latest.tsv"
    log "results: $RESULTS"
    python3 "$HELPER" summary "$RESULTS" >&2 || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_bg LOG CPU CMD...: background, pinned, output to $W/LOG; sets BG_PID
# (the server's own PID: taskset and prlimit exec their command).
start_bg() {
  local name=$1 cpu=$2
  shift 2
  taskset -c "$cpu" "$@" >"$W/$name.log" 2>&1 &
  BG_PID=$!
  PIDS+=("$BG_PID")
}

record() {
  printf 'pressure\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" >>"$RESULTS"
  log "  $1 | $2 | $3 = $5 $6 (rep $4)"
}
# record_kv TARGET SCEN REP PREFIX FILE UNITSPEC...: one row per key=value
# line of FILE whose key is listed as key:unit.
record_kv() {
  local tgt=$1 scen=$2 rep=$3 prefix=$4 file=$5 spec k v
  shift 5
  for spec in "$@"; do
    k=${spec%%:*}
    v=$(awk -F= -v k="$k" '$1==k{print $2}' "$file")
    [[ -n $v ]] && record "$tgt" "$scen" "$prefix$k" "$rep" "$v" "${spec#*:}"
  done
  return 0
}

wait_tcp() { # HOST PORT SECONDS
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
wait_file() { # FILE SECONDS
  local i
  for ((i = 0; i < $2 * 20; i++)); do [[ -e $1 ]] && return 0; sleep 0.05; done
  return 1
}
descendants() {
  local c
  echo "$1"
  # shellcheck disable=SC2013 # the files hold space-separated PIDs
  for c in $(cat "/proc/$1/task/"*/children 2>/dev/null); do descendants "$c"; done
}
cpu_ticks() { # utime+stime of PID and descendants
  local p t=0 v
  for p in $(descendants "$1"); do
    v=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12+$13}')
    t=$((t + ${v:-0}))
  done
  echo "$t"
}
rss_kb() { # VmRSS of PID and descendants
  local p t=0 v
  for p in $(descendants "$1"); do
    v=$(awk '/^VmRSS:/{print $2}' "/proc/$p/status" 2>/dev/null)
    t=$((t + ${v:-0}))
  done
  echo "$t"
}
helper() { # bounded: every subcommand has its own cap, this is the backstop
  timeout -k 2 120 taskset -c "$CLIENT_CPU" python3 "$HELPER" "$@"
}
tmof() { grep -ci 'too many open files' "$1" || true; }

log "reps=$REPS scenarios='$SCENARIOS' sut_cpu=$SUT_CPU client_cpu=$CLIENT_CPU results=$RESULTS"
{
  echo "crc-appliance: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null) $("$CRC_BIN" --version 2>/dev/null | head -1)"
  echo "haproxy: $(haproxy -v 2>/dev/null | head -1)"
  echo "nginx: $(nginx -v 2>&1)"
  echo "curl: $(curl --version | head -1)"
  echo "kernel: $(uname -r), cpus: $(nproc), loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  [[ -n ${CRC_BEFORE_BIN:-} ]] && echo "crc-before: $("$CRC_BEFORE_BIN" --version 2>/dev/null | head -1) ($CRC_BEFORE_BIN)"
  echo "tftpd-hpa: $(dpkg-query -W -f '${Version}' tftpd-hpa 2>/dev/null || echo none)"
  echo "knotd: $(knotd --version 2>/dev/null | head -1)"
  echo "env: REPS=$REPS NOFILE=$NOFILE FLOOD_N=$FLOOD_N MEASURE_S=$MEASURE_S SLOW_N=$SLOW_N SLOW_S=$SLOW_S H2_N=$H2_N H2_SRCS=$H2_SRCS H2_S=$H2_S MULTI_N=$MULTI_N MULTI_SRCS=$MULTI_SRCS IGN_MB=$IGN_MB IGN_PAR=$IGN_PAR IGN_ROUNDS=$IGN_ROUNDS HOG_BURST=$HOG_BURST HOG_S=$HOG_S LEGIT_N=$LEGIT_N DNSLOG_N=$DNSLOG_N DNSLOG_KINDS='$DNSLOG_KINDS' DNSLOG_SETTLE=$DNSLOG_SETTLE"
} >"$RAW/versions.txt"

# ====================================================================== lb
LB_NET=127.0.41
B_IPS=("$LB_NET.11" "$LB_NET.12")
P_API=16443 P_MC=22623 P_HTTP=18080 P_HTTPS=18443
CRC_CAP=""

lb_setup() {
  mkdir -p "$W/be"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$W/be/key.pem" -out "$W/be/cert.pem" -days 2 -subj /CN=bench 2>"$W/openssl.log" \
    || die "openssl: $(cat "$W/openssl.log")"
  local i ip
  for i in 0 1; do
    ip=${B_IPS[$i]}
    mkdir -p "$W/be/$i/tmp"
    cat >"$W/be/$i/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile 8192;
error_log stderr error;
pid $W/be/$i/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $W/be/$i/tmp; proxy_temp_path $W/be/$i/tmp; fastcgi_temp_path $W/be/$i/tmp;
  uwsgi_temp_path $W/be/$i/tmp; scgi_temp_path $W/be/$i/tmp;
  default_type text/plain;
  server { listen $ip:$P_HTTP backlog=4096; location / { return 200 "b$i\n"; } }
  server {
    listen $ip:$P_API ssl backlog=4096; listen $ip:$P_MC ssl; listen $ip:$P_HTTPS ssl;
    ssl_certificate $W/be/cert.pem; ssl_certificate_key $W/be/key.pem;
    location = /readyz { return 200 "ok\n"; }
    location = /healthz { return 200 "ok\n"; }
    location / { return 200 "b$i\n"; }
  }
}
EOF
    start_bg "be$i" "$CLIENT_CPU" nginx -e stderr -p "$W/be/$i" -c "$W/be/$i/nginx.conf"
    wait_tcp "$ip" "$P_API" 10 || die "backend $i did not start: $(tail -3 "$W/be$i.log")"
  done
}

gen_crc_lb() { # ADDR ADMIN_PORT
  cat >"$W/crc-lb.yaml" <<EOF
name: bench
baseDomain: crc.testing
network: { cidr: $LB_NET.0/24, gateway: $LB_NET.1, applianceIP: $LB_NET.2 }
nodes:
  - { name: master-0, role: master, mac: "52:54:00:29:00:0b", ip: ${B_IPS[0]} }
  - { name: master-1, role: master, mac: "52:54:00:29:00:0c", ip: ${B_IPS[1]} }
dns: { enabled: false }
dhcp: { enabled: false }
http: { enabled: false }
admin: { listen: "127.0.0.1:$2" }
loadBalancer:
  listen: { api: "$1:$P_API", machineConfig: "$1:$P_MC", ingressHttp: "$1:$P_HTTP", ingressHttps: "$1:$P_HTTPS" }
  backendPorts: { api: $P_API, machineConfig: $P_MC, ingressHttp: $P_HTTP, ingressHttps: $P_HTTPS }
  healthCheck: { interval: 1s, timeout: 1s, rise: 2, fall: 2 }
EOF
}

gen_haproxy() { # ADDR CAP("" = HAProxy's defaults)
  local a=$1 cap=$2 ip
  {
    cat <<EOF
global
    nbthread 1
    stats socket $W/hap.sock mode 600 level admin
    log stderr format raw local0 notice
defaults
    mode tcp
    log global
    balance roundrobin
    timeout connect 3s
    timeout client 1h
    timeout server 1h
    timeout check 1s
    default-server inter 1s fall 2 rise 2
EOF
    [[ -n $cap ]] && echo "    maxconn $cap"
    local pool port chk
    for pool in api:$P_API:https-readyz mc:$P_MC:https-healthz http:$P_HTTP:tcp https:$P_HTTPS:tls; do
      IFS=: read -r name port chk <<<"$pool"
      printf 'frontend fe_%s\n    bind %s:%s\n    default_backend be_%s\nbackend be_%s\n' "$name" "$a" "$port" "$name" "$name"
      case $chk in
        https-readyz) echo "    option httpchk GET /readyz" ;;
        https-healthz) echo "    option httpchk GET /healthz" ;;
      esac
      for ip in "${B_IPS[@]}"; do
        case $chk in
          tcp) echo "    server ${ip##*.} $ip:$port check" ;;
          *) echo "    server ${ip##*.} $ip:$port check check-ssl verify none" ;;
        esac
      done
    done
  } >"$W/haproxy.cfg"
}

lb_cell() { # TARGET REP
  local tgt=$1 rep=$2 addr watch pid i up
  case $tgt in
    crc)
      addr=$LB_NET.2
      local admin_port=19181
      gen_crc_lb "$addr" "$admin_port"
      RUST_LOG=warn,crc_appliance=info start_bg "lb-$tgt" "$SUT_CPU" \
        prlimit --nofile="$NOFILE:$NOFILE" "$CRC_BIN" serve --cluster "$W/crc-lb.yaml"
      watch=(crc "http://127.0.0.1:$admin_port/api/lb/backends")
      ;;
    haproxy-*)
      addr=$LB_NET.3
      local cap=""
      if [[ $tgt == haproxy-cap ]]; then cap=${CRC_CAP:?crc must run first to learn its cap}; fi
      gen_haproxy "$addr" "$cap"
      cp "$W/haproxy.cfg" "$RAW/$tgt.cfg"
      rm -f "$W/hap.sock"
      start_bg "lb-$tgt" "$SUT_CPU" prlimit --nofile="$NOFILE:$NOFILE" haproxy -db -f "$W/haproxy.cfg"
      watch=(haproxy "$W/hap.sock")
      ;;
  esac
  pid=$BG_PID
  wait_tcp "$addr" "$P_API" 10 || die "$tgt did not listen: $(tail -5 "$W/lb-$tgt.log")"
  # all 8 backends (2 per pool) up, bounded
  for ((i = 0; i < 20; i++)); do
    up=$(helper lbwatch "${watch[@]}" 0.1 0.1 | awk -F= '$1=="up_at_end"{print $2}')
    [[ $up == 8 ]] && break
    sleep 0.5
  done
  [[ $up == 8 ]] || log "  WARNING: $tgt has $up of 8 backends up before the flood"
  if [[ $tgt == crc && -z $CRC_CAP ]]; then
    CRC_CAP=$(grep -o 'lb [0-9]* per frontend' "$W/lb-$tgt.log" | head -1 | awk '{print $2}')
    [[ -n $CRC_CAP ]] || die "crc-appliance did not log a scaled cap: $(tail -5 "$W/lb-crc.log")"
    log "  crc-appliance scaled its cap to $CRC_CAP per frontend under nofile $NOFILE"
  fi
  [[ $tgt == crc ]] && record "$tgt" lb_flood frontend_maxconn "$rep" "$CRC_CAP" conns
  if [[ $tgt == haproxy-* ]]; then
    helper hapcmd "$W/hap.sock" "show info" >"$W/hapinfo.txt" || true
    record "$tgt" lb_flood global_maxconn "$rep" "$(awk -F': ' '$1=="Maxconn"{print $2}' "$W/hapinfo.txt")" conns
    helper hapcmd "$W/hap.sock" "show stat" >"$W/hapstat.txt" || true
    cp "$W/hapinfo.txt" "$W/hapstat.txt" "$RAW/" 2>/dev/null || true
    # slim (session limit) of the flooded frontend: what HAProxy applies
    record "$tgt" lb_flood frontend_maxconn "$rep" \
      "$(awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="slim") c=i} $1=="fe_http" && $2=="FRONTEND"{print $c}' "$W/hapstat.txt")" conns
  fi
  record "$tgt" lb_flood rss_before "$rep" "$(rss_kb "$pid")" kB
  # baseline: 3 s of api requests without the flood
  helper probe "$addr" "$P_API" /small.txt 3 0.05 2 --tls >"$W/base.kv"
  record_kv "$tgt" lb_baseline "$rep" api_ "$W/base.kv" success_rate:ratio p50_ms:ms p99_ms:ms
  # the flood: FLOOD_N idle connections on ingress-http, held, not reopened
  rm -f "$W/flood.ready"
  taskset -c "$CLIENT_CPU" timeout -k 2 $((MEASURE_S + 30)) python3 "$HELPER" flood "$addr" "$P_HTTP" "$FLOOD_N" \
    $((MEASURE_S + 20)) --ready "$W/flood.ready" >"$W/flood.kv" 2>&1 &
  local fpid=$!
  PIDS+=("$fpid")
  wait_file "$W/flood.ready" 20 || log "  WARNING: flood not ready"
  sleep 2   # let the accepts (and the refusals over the cap) settle
  local c0 c1
  c0=$(cpu_ticks "$pid")
  helper lbwatch "${watch[@]}" "$MEASURE_S" 1 >"$W/watch.kv" &
  local wpid=$!
  PIDS+=("$wpid")
  helper probe "$addr" "$P_HTTP" /small.txt "$MEASURE_S" 0.2 2 >"$W/flooded.kv" &
  local ppid=$!
  PIDS+=("$ppid")
  helper probe "$addr" "$P_API" /small.txt "$MEASURE_S" 0.05 2 --tls >"$W/api.kv"
  wait_pid "$ppid" 5   # both end by themselves within MEASURE_S + 3 s
  wait_pid "$wpid" 5
  c1=$(cpu_ticks "$pid")
  # Ground truth on the server side, flood still held: established
  # connections on the flooded frontend (accepted ones and those waiting in
  # the accept queue) and the accept queue itself. The flood client's
  # open_at_end can be higher: when a listen queue overflows, Linux drops
  # the client's final ACK, the client believes it is connected and the
  # server has no such connection (ghosts, never closed because idle).
  record "$tgt" lb_flood server_side_established "$rep" \
    "$(ss -Htn state established "( sport = :$P_HTTP )" | awk -v a="$addr:$P_HTTP" '$3==a' | wc -l)" conns
  record "$tgt" lb_flood accept_queue "$rep" \
    "$(ss -Hltn "( sport = :$P_HTTP )" | awk -v a="$addr:$P_HTTP" '$4==a{print $2}')" conns
  record "$tgt" lb_flood listen_backlog "$rep" \
    "$(ss -Hltn "( sport = :$P_HTTP )" | awk -v a="$addr:$P_HTTP" '$4==a{print $3}')" conns
  if [[ $tgt == crc ]]; then
    curl -s --max-time 2 "${watch[1]}" >"$W/lbstatus.json" || true
    record "$tgt" lb_flood rejected_over_cap "$rep" "$(python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); print([p["rejectedOverCap"] for p in d["pools"] if p["name"]=="ingress-http"][0])' "$W/lbstatus.json" 2>/dev/null || echo nan)" conns
  fi
  record "$tgt" lb_flood rss_during "$rep" "$(rss_kb "$pid")" kB
  record "$tgt" lb_flood server_cpu "$rep" "$(( (c1 - c0) * 1000 / CLK_TCK ))" ms
  stop_pid "$fpid"
  record_kv "$tgt" lb_flood "$rep" api_ "$W/api.kv" attempts:count success_rate:ratio p50_ms:ms p99_ms:ms max_ms:ms
  record_kv "$tgt" lb_flood "$rep" flooded_fe_ "$W/flooded.kv" success_rate:ratio p50_ms:ms
  record_kv "$tgt" lb_flood "$rep" flood_ "$W/flood.kv" established_peak:conns open_at_end:conns closed_by_server:conns connect_timeout:conns
  record_kv "$tgt" lb_flood "$rep" status_ "$W/watch.kv" polls:count poll_failed:count min_up:of_8 up_at_end:of_8 down_events:count
  for f in base api flooded flood watch; do cp "$W/$f.kv" "$RAW/lb-$tgt-$rep-$f.kv"; done
  stop_pid "$pid"
  record "$tgt" lb_flood too_many_open_files "$rep" "$(tmof "$W/lb-$tgt.log")" lines
  cp "$W/lb-$tgt.log" "$RAW/lb-$tgt-$rep.log"
}

# ====================================================================== http
H_ADDR=127.0.0.1 H_PORT=18190 H2_PORT=18191

http_setup() {
  [[ -d $W/www ]] && return 0
  mkdir -p "$W/www" "$W/ign" "$W/ngx/tmp"
  printf 'small file for the bench\n' >"$W/www/small.txt"
  log "creating a ${IGN_MB} MB ignition file"
  python3 "$HELPER" mkign "$W/ign/master.ign" "$IGN_MB"
  IGN_SIZE=$(stat -c %s "$W/ign/master.ign")
  # crc-appliance: http only, defaults otherwise (maxConnectionsPerClient 64)
  cat >"$W/crc-http.yaml" <<EOF
name: bench
baseDomain: crc.testing
network: { cidr: 127.0.42.0/24, gateway: 127.0.42.1, applianceIP: 127.0.42.2 }
nodes:
  - { name: master-0, role: master, mac: "52:54:00:2a:00:0b", ip: 127.0.42.11 }
  - { name: master-1, role: master, mac: "52:54:00:2a:00:0c", ip: 127.0.42.12 }
  - { name: master-2, role: master, mac: "52:54:00:2a:00:0d", ip: 127.0.42.13 }
dns: { enabled: false }
dhcp: { enabled: false }
loadBalancer: { enabled: false }
admin: { enabled: false }
http: { listen: "$H_ADDR:$H_PORT", imagesDir: "$W/www", ignitionDir: "$W/ign" }
EOF
  # nginx: stock-like. Debian's nginx.conf has worker_processes auto and
  # worker_connections 768; here 1 worker (the server core) and 1024.
  cat >"$W/ngx/nginx.conf" <<EOF
daemon off;
worker_processes 1;
error_log $W/ngx/error.log warn;
pid $W/ngx/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_timeout 65;
  client_body_temp_path $W/ngx/tmp; proxy_temp_path $W/ngx/tmp; fastcgi_temp_path $W/ngx/tmp;
  uwsgi_temp_path $W/ngx/tmp; scgi_temp_path $W/ngx/tmp;
  types { text/plain txt; application/json ign; }
  default_type application/octet-stream;
  server {
    listen $H_ADDR:$H_PORT;
    listen $H_ADDR:$H2_PORT http2;
    root $W/www;
    location = /master.ign { root $W/ign; }
  }
}
EOF
  cp "$W/ngx/nginx.conf" "$RAW/nginx-http.conf"
  # crc for the nofile scenario: 7 nodes, LB (default cap), DNS, HTTP
  {
    cat <<EOF
name: bench
baseDomain: crc.testing
network: { cidr: 127.0.43.0/24, gateway: 127.0.43.1, applianceIP: 127.0.43.2 }
dns: { listen: ["127.0.43.2:18153"] }
dhcp: { enabled: false }
admin: { enabled: false }
loadBalancer:
  listen: { api: "127.0.43.2:18443", machineConfig: "127.0.43.2:18623", ingressHttp: "127.0.43.2:18080", ingressHttps: "127.0.43.2:18444" }
  backendPorts: { api: 18901, machineConfig: 18902, ingressHttp: 18903, ingressHttps: 18904 }
http: { listen: "$H_ADDR:$H_PORT", imagesDir: "$W/www", ignitionDir: "$W/ign" }
nodes:
EOF
    local i role
    for i in 0 1 2 3 4 5 6; do
      role=worker
      ((i < 3)) && role=master
      printf '  - { name: node-%s, role: %s, mac: "52:54:00:2b:00:%02x", ip: 127.0.43.%s }\n' "$i" "$role" $((16 + i)) $((10 + i))
    done
  } >"$W/crc-nofile.yaml"
  cp "$W/crc-nofile.yaml" "$RAW/crc-nofile.yaml"
  mkdir -p "$W/ign-empty"
  sed "s#ignitionDir: \"$W/ign\"#ignitionDir: \"$W/ign-empty\"#" "$W/crc-http.yaml" >"$W/crc-http-empty.yaml"
  grep -q ign-empty "$W/crc-http-empty.yaml" || die "could not write crc-http-empty.yaml"
  cp "$W/crc-http.yaml" "$RAW/crc-http.yaml"
}

start_http() { # TARGET -> SRV_PID, SRV_LOG
  case $1 in
    crc) RUST_LOG=warn start_bg http-crc "$SUT_CPU" "$CRC_BIN" serve --cluster "$W/crc-http.yaml"
         SRV_LOG=$W/http-crc.log ;;
    nginx) : >"$W/ngx/error.log"
           start_bg http-nginx "$SUT_CPU" nginx -e stderr -p "$W/ngx" -c "$W/ngx/nginx.conf"
           SRV_LOG=$W/ngx/error.log ;;
  esac
  SRV_PID=$BG_PID
  wait_tcp "$H_ADDR" "$H_PORT" 10 || die "$1 did not listen: $(tail -5 "$W/http-$1.log")"
  sleep 0.5
}

slowloris_cell() { # TARGET REP
  local tgt=$1 rep=$2
  start_http "$tgt"
  helper probe "$H_ADDR" "$H_PORT" /small.txt 2 0.2 5 --src 127.0.0.3 >"$W/sbase.kv"
  record_kv "$tgt" slowloris_baseline "$rep" client_ "$W/sbase.kv" success_rate:ratio p50_ms:ms
  rm -f "$W/flood.ready"
  taskset -c "$CLIENT_CPU" timeout -k 2 $((SLOW_S + 30)) python3 "$HELPER" flood "$H_ADDR" "$H_PORT" "$SLOW_N" \
    $((SLOW_S + 1)) --src 127.0.0.2 --head 'GET /small.txt HTTP/1.1\r\nHost: x\r\n' \
    --reopen-rate 100 --ready "$W/flood.ready" >"$W/sflood.kv" 2>&1 &
  local fpid=$! c0 c1
  PIDS+=("$fpid")
  wait_file "$W/flood.ready" 20 || log "  WARNING: slowloris not ready"
  c0=$(cpu_ticks "$SRV_PID")
  helper probe "$H_ADDR" "$H_PORT" /small.txt "$SLOW_S" 0.2 5 --src 127.0.0.3 >"$W/sprobe.kv"
  c1=$(cpu_ticks "$SRV_PID")
  record "$tgt" slowloris rss_during "$rep" "$(rss_kb "$SRV_PID")" kB
  record "$tgt" slowloris server_cpu "$rep" "$(( (c1 - c0) * 1000 / CLK_TCK ))" ms
  stop_pid "$fpid"
  record_kv "$tgt" slowloris "$rep" client_ "$W/sprobe.kv" attempts:count success_rate:ratio p50_ms:ms p99_ms:ms max_ms:ms
  record_kv "$tgt" slowloris "$rep" slow_ "$W/sflood.kv" established_peak:conns open_at_end:conns closed_by_server:conns reopened:conns connect_timeout:conns
  cp "$W/sprobe.kv" "$RAW/slowloris-$tgt-$rep-probe.kv"
  cp "$W/sflood.kv" "$RAW/slowloris-$tgt-$rep-flood.kv"
  stop_pid "$SRV_PID"
  record "$tgt" slowloris too_many_open_files "$rep" "$(tmof "$SRV_LOG")" lines
  [[ $tgt == nginx ]] && record "$tgt" slowloris not_enough_worker_connections "$rep" \
    "$(grep -c 'worker_connections are not enough' "$SRV_LOG" || true)" lines
  cp "$SRV_LOG" "$RAW/slowloris-$tgt-$rep.log"
}

# srcs PREFIX N: "PREFIX.1,PREFIX.2,...,PREFIX.N"
srcs() { local i out=(); for ((i = 1; i <= $2; i++)); do out+=("$1.$i"); done; (IFS=,; echo "${out[*]}"); }

h2idle_cell() { # TARGET REP
  local tgt=$1 rep=$2 port=$H_PORT fpid c0 c1
  [[ $tgt == nginx ]] && port=$H2_PORT
  start_http "$tgt"
  helper probe "$H_ADDR" "$H_PORT" /small.txt 2 0.5 3 --src 127.0.0.3 >"$W/hbase.kv"
  record_kv "$tgt" h2idle_baseline "$rep" client_ "$W/hbase.kv" success_rate:ratio p50_ms:ms
  rm -f "$W/flood.ready"
  taskset -c "$CLIENT_CPU" timeout -k 2 $((H2_S + 30)) python3 "$HELPER" flood "$H_ADDR" "$port" "$H2_N" \
    "$H2_S" --srcs "$(srcs 127.0.5 "$H2_SRCS")" --connect-rate 500 \
    --head 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00' \
    --ready "$W/flood.ready" >"$W/hflood.kv" 2>&1 &
  fpid=$!
  PIDS+=("$fpid")
  wait_file "$W/flood.ready" 20 || log "  WARNING: h2 flood not ready"
  sleep 1.5
  c0=$(cpu_ticks "$SRV_PID")
  helper probe "$H_ADDR" "$H_PORT" /small.txt 8 0.5 3 --src 127.0.0.3 >"$W/hprobe.kv"
  c1=$(cpu_ticks "$SRV_PID")
  record "$tgt" h2idle server_established_after_probe "$rep" \
    "$(ss -Htn state established "( sport = :$port )" | wc -l)" conns
  record "$tgt" h2idle rss_during "$rep" "$(rss_kb "$SRV_PID")" kB
  record "$tgt" h2idle server_cpu "$rep" "$(( (c1 - c0) * 1000 / CLK_TCK ))" ms
  wait_pid "$fpid" $((H2_S + 5))   # ends by itself after H2_S s
  record_kv "$tgt" h2idle "$rep" client_ "$W/hprobe.kv" attempts:count success_rate:ratio p50_ms:ms p99_ms:ms max_ms:ms
  record_kv "$tgt" h2idle "$rep" h2_ "$W/hflood.kv" established_peak:conns open_at_end:conns closed_by_server:conns \
    closed_p50_s:s closed_max_s:s connect_timeout:conns
  cp "$W/hprobe.kv" "$RAW/h2idle-$tgt-$rep-probe.kv"
  cp "$W/hflood.kv" "$RAW/h2idle-$tgt-$rep-flood.kv"
  stop_pid "$SRV_PID"
  [[ $tgt == nginx ]] && record "$tgt" h2idle not_enough_worker_connections "$rep" \
    "$(grep -c 'worker_connections are not enough' "$SRV_LOG" || true)" lines
  cp "$SRV_LOG" "$RAW/h2idle-$tgt-$rep.log"
}

slowmulti_cell() { # TARGET REP
  local tgt=$1 rep=$2 fpid c0 c1
  start_http "$tgt"
  helper probe "$H_ADDR" "$H_PORT" /small.txt 2 0.2 5 --src 127.0.0.3 >"$W/mbase.kv"
  record_kv "$tgt" slowmulti_baseline "$rep" client_ "$W/mbase.kv" success_rate:ratio p50_ms:ms
  rm -f "$W/flood.ready"
  taskset -c "$CLIENT_CPU" timeout -k 2 $((SLOW_S + 30)) python3 "$HELPER" flood "$H_ADDR" "$H_PORT" "$MULTI_N" \
    $((SLOW_S + 1)) --srcs "$(srcs 127.0.6 "$MULTI_SRCS")" --head 'GET /small.txt HTTP/1.1\r\nHost: x\r\n' \
    --reopen-rate 100 --ready "$W/flood.ready" >"$W/mflood.kv" 2>&1 &
  fpid=$!
  PIDS+=("$fpid")
  wait_file "$W/flood.ready" 20 || log "  WARNING: slowloris not ready"
  c0=$(cpu_ticks "$SRV_PID")
  helper probe "$H_ADDR" "$H_PORT" /small.txt "$SLOW_S" 0.2 5 --src 127.0.0.3 >"$W/mprobe.kv"
  c1=$(cpu_ticks "$SRV_PID")
  record "$tgt" slowmulti rss_during "$rep" "$(rss_kb "$SRV_PID")" kB
  record "$tgt" slowmulti server_cpu "$rep" "$(( (c1 - c0) * 1000 / CLK_TCK ))" ms
  stop_pid "$fpid"
  record_kv "$tgt" slowmulti "$rep" client_ "$W/mprobe.kv" attempts:count success_rate:ratio p50_ms:ms p99_ms:ms max_ms:ms
  record_kv "$tgt" slowmulti "$rep" slow_ "$W/mflood.kv" established_peak:conns open_at_end:conns closed_by_server:conns reopened:conns connect_timeout:conns
  cp "$W/mprobe.kv" "$RAW/slowmulti-$tgt-$rep-probe.kv"
  cp "$W/mflood.kv" "$RAW/slowmulti-$tgt-$rep-flood.kv"
  stop_pid "$SRV_PID"
  [[ $tgt == nginx ]] && record "$tgt" slowmulti not_enough_worker_connections "$rep" \
    "$(grep -c 'worker_connections are not enough' "$SRV_LOG" || true)" lines
  cp "$SRV_LOG" "$RAW/slowmulti-$tgt-$rep.log"
}

nofile_cell() { # TARGET REP
  local tgt=$1 rep=$2 fpid line
  case $tgt in
    crc) RUST_LOG=info start_bg http-crc "$SUT_CPU" prlimit --nofile="$NOFILE:$NOFILE" \
           "$CRC_BIN" serve --cluster "$W/crc-nofile.yaml"
         SRV_LOG=$W/http-crc.log ;;
    nginx) : >"$W/ngx/error.log"
           start_bg http-nginx "$SUT_CPU" prlimit --nofile="$NOFILE:$NOFILE" \
             nginx -e stderr -p "$W/ngx" -c "$W/ngx/nginx.conf"
           SRV_LOG=$W/ngx/error.log ;;
  esac
  SRV_PID=$BG_PID
  wait_tcp "$H_ADDR" "$H_PORT" 10 || die "$tgt did not listen: $(tail -5 "$W/http-$tgt.log")"
  sleep 0.5
  if [[ $tgt == crc ]]; then
    # "open files 1024: http 70 connections (8 per client: 8 clients at their limit), dns tcp 16 ..."
    line=$(grep -o "open files $NOFILE: .*" "$SRV_LOG" | head -1)
    record "$tgt" nofile http_connections "$rep" "$(grep -oP 'http \K[0-9]+' <<<"$line")" conns
    record "$tgt" nofile http_per_client "$rep" "$(grep -oP '\(\K[0-9]+(?= per client)' <<<"$line")" conns
    record "$tgt" nofile dns_tcp_per_address "$rep" "$(grep -oP 'dns tcp \K[0-9]+' <<<"$line")" conns
    record "$tgt" nofile lb_per_frontend "$rep" "$(grep -oP 'lb \K[0-9]+' <<<"$line")" conns
  fi
  rm -f "$W/flood.ready"
  taskset -c "$CLIENT_CPU" timeout -k 2 40 python3 "$HELPER" flood "$H_ADDR" "$H_PORT" 10 12 --src 127.0.0.2 \
    --head 'GET /small.txt HTTP/1.1\r\nHost: x\r\n' --reopen-rate 100 --ready "$W/flood.ready" >"$W/nflood.kv" 2>&1 &
  fpid=$!
  PIDS+=("$fpid")
  wait_file "$W/flood.ready" 20 || log "  WARNING: flood not ready"
  sleep 0.5
  helper probe "$H_ADDR" "$H_PORT" /small.txt 10 0.5 3 --src 127.0.0.3 >"$W/nprobe.kv"
  stop_pid "$fpid"
  record_kv "$tgt" nofile "$rep" client_ "$W/nprobe.kv" attempts:count success_rate:ratio p50_ms:ms max_ms:ms
  record_kv "$tgt" nofile "$rep" slow_ "$W/nflood.kv" established_peak:conns open_at_end:conns closed_by_server:conns
  stop_pid "$SRV_PID"
  record "$tgt" nofile too_many_open_files "$rep" "$(tmof "$SRV_LOG")" lines
  cp "$SRV_LOG" "$RAW/nofile-$tgt-$rep.log"
}

ignnodes_cell() { # TARGET REP
  local tgt=$1 rep=$2 base k c0 c1 rpid peak bad url cpids=()
  start_http "$tgt"
  base=$(rss_kb "$SRV_PID")
  rm -f "$W/rss.ready"
  timeout -k 2 120 python3 "$HELPER" rss "$SRV_PID" 0.02 100 "$W/rss.ready" >"$W/rss.kv" &
  rpid=$!
  PIDS+=("$rpid")
  wait_file "$W/rss.ready" 10 || true
  c0=$(cpu_ticks "$SRV_PID")
  for k in 0 1 2; do
    url=http://$H_ADDR:$H_PORT/master.ign
    [[ $tgt == crc ]] && url=http://$H_ADDR:$H_PORT/ignition/master-$k.ign
    taskset -c "$CLIENT_CPU" curl -s --max-time 60 --interface "127.0.42.1$((k + 1))" -o /dev/null \
      -w '%{http_code} %{size_download}\n' "$url" >"$W/ignn-$k.out" 2>&1 &
    cpids+=("$!")
  done
  for k in "${cpids[@]}"; do wait "$k" || true; done   # each bounded by --max-time
  c1=$(cpu_ticks "$SRV_PID")
  stop_pid "$rpid"
  peak=$(awk -F= '$1=="peak_kb"{print $2}' "$W/rss.kv")
  bad=0
  for k in 0 1 2; do
    # crc's merged body is the file plus the node's /etc/hostname entry
    read -r code size <"$W/ignn-$k.out"
    [[ $code == 200 && $size -ge $IGN_SIZE ]] || bad=$((bad + 1))
  done
  record "$tgt" ignnodes failed_fetches "$rep" "$bad" of_3
  record "$tgt" ignnodes rss_start "$rep" "$(( base / 1024 ))" MiB
  record "$tgt" ignnodes rss_growth "$rep" "$(( (peak - base) / 1024 ))" MiB
  record "$tgt" ignnodes rss_peak "$rep" "$(( peak / 1024 ))" MiB
  record "$tgt" ignnodes rss_after "$rep" "$(( $(rss_kb "$SRV_PID") / 1024 ))" MiB
  record "$tgt" ignnodes cpu_per_req "$rep" \
    "$(awk -v c=$((c1 - c0)) -v t="$CLK_TCK" 'BEGIN{printf "%.1f", c*1000/t/3}')" ms
  stop_pid "$SRV_PID"
}

ignition_cell() { # TARGET REP
  local tgt=$1 rep=$2 base r k c0 c1 t0 t1 bad rpid peak cpids
  if [[ $tgt == crc ]]; then
    # crc-appliance's start-up preflight reads and parses <role>.ign: its
    # RSS right after start depends on the file. Same config, empty
    # ignitionDir, for reference.
    RUST_LOG=warn start_bg http-crc-empty "$SUT_CPU" "$CRC_BIN" serve --cluster "$W/crc-http-empty.yaml"
    wait_tcp "$H_ADDR" "$H_PORT" 10 || die "crc (empty ignitionDir) did not listen: $(tail -5 "$W/http-crc-empty.log")"
    sleep 0.5
    record "$tgt" ignition rss_start_empty_ignition_dir "$rep" "$(rss_kb "$BG_PID")" kB
    stop_pid "$BG_PID"
  fi
  start_http "$tgt"
  base=$(rss_kb "$SRV_PID")
  record "$tgt" ignition rss_start "$rep" "$base" kB
  for ((r = 1; r <= IGN_ROUNDS; r++)); do
    rm -f "$W/rss.ready"
    timeout -k 2 120 python3 "$HELPER" rss "$SRV_PID" 0.02 100 "$W/rss.ready" >"$W/rss.kv" &
    rpid=$!
    PIDS+=("$rpid")
    wait_file "$W/rss.ready" 10 || true
    c0=$(cpu_ticks "$SRV_PID")
    t0=$(date +%s.%N)
    cpids=()
    for ((k = 0; k < IGN_PAR; k++)); do
      taskset -c "$CLIENT_CPU" curl -s --max-time 60 -o /dev/null -w '%{http_code} %{size_download}\n' \
        "http://$H_ADDR:$H_PORT/master.ign" >"$W/ign-$k.out" 2>&1 &
      cpids+=("$!")
    done
    for k in "${cpids[@]}"; do wait "$k" || true; done   # each bounded by --max-time
    t1=$(date +%s.%N)
    c1=$(cpu_ticks "$SRV_PID")
    stop_pid "$rpid"
    peak=$(awk -F= '$1=="peak_kb"{print $2}' "$W/rss.kv")
    bad=0
    for ((k = 0; k < IGN_PAR; k++)); do
      [[ $(cat "$W/ign-$k.out") == "200 $IGN_SIZE" ]] || bad=$((bad + 1))
    done
    record "$tgt" "ignition_r$r" failed_fetches "$rep" "$bad" "of_$IGN_PAR"
    record "$tgt" "ignition_r$r" rss_growth "$rep" "$(( (peak - base) / 1024 ))" MiB
    record "$tgt" "ignition_r$r" rss_peak "$rep" "$(( peak / 1024 ))" MiB
    record "$tgt" "ignition_r$r" cpu_per_req "$rep" \
      "$(awk -v c=$((c1 - c0)) -v t="$CLK_TCK" -v n="$IGN_PAR" 'BEGIN{printf "%.1f", c*1000/t/n}')" ms
    record "$tgt" "ignition_r$r" wall "$rep" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')" s
  done
  stop_pid "$SRV_PID"
}

# ====================================================================== tftp
T_ADDR=127.0.43.1 T_PORT=16969 T_FILE=undionly.kpxe

tftp_setup() {
  [[ -d $W/tftp ]] && return 0
  command -v in.tftpd >/dev/null || die "missing in.tftpd (apt-get install tftpd-hpa)"
  mkdir -p "$W/tftp"
  if [[ -f /usr/lib/ipxe/$T_FILE ]]; then cp "/usr/lib/ipxe/$T_FILE" "$W/tftp/"
  else head -c 70000 /dev/urandom >"$W/tftp/$T_FILE"; fi
  cat >"$W/crc-tftp.yaml" <<EOF
name: bench
baseDomain: crc.testing
network: { cidr: 127.0.43.0/24, gateway: 127.0.43.254, applianceIP: 127.0.43.1 }
nodes:
  - { name: master-0, role: master, mac: "52:54:00:2b:00:0b", ip: 127.0.43.11 }
dns: { enabled: false }
dhcp: { enabled: false }
loadBalancer: { enabled: false }
http: { enabled: false }
admin: { enabled: false }
pxe: { tftpListen: "$T_ADDR:$T_PORT", tftpRoot: "$W/tftp" }
EOF
  cp "$W/crc-tftp.yaml" "$RAW/crc-tftp.yaml"
}

tftphog_cell() { # TARGET REP
  local tgt=$1 rep=$2 hpid
  case $tgt in
    crc) RUST_LOG=warn start_bg tftp-crc "$SUT_CPU" "$CRC_BIN" serve --cluster "$W/crc-tftp.yaml" ;;
    crc-before) RUST_LOG=warn start_bg tftp-crc-before "$SUT_CPU" "$CRC_BEFORE_BIN" serve \
                  --cluster "$W/crc-tftp.yaml" ;;
    tftpd-hpa) start_bg tftp-tftpd-hpa "$SUT_CPU" in.tftpd --foreground --listen \
                 --address "$T_ADDR:$T_PORT" --secure "$W/tftp" ;;
  esac
  SRV_PID=$BG_PID
  sleep 1
  kill -0 "$SRV_PID" || die "$tgt did not start: $(tail -5 "$W/tftp-$tgt.log")"
  helper tftpget "$T_ADDR" "$T_PORT" "$T_FILE" 5 0.2 10 --src 127.0.0.3 >"$W/tbase.kv"
  record_kv "$tgt" tftphog_baseline "$rep" legit_ "$W/tbase.kv" success_rate:ratio p50_ms:ms
  rm -f "$W/hog.ready"
  taskset -c "$CLIENT_CPU" timeout -k 2 $((HOG_S + 10)) python3 "$HELPER" tftphog "$T_ADDR" "$T_PORT" \
    "$T_FILE" "$HOG_BURST" 5 "$HOG_S" --src 127.0.0.2 --ready "$W/hog.ready" >"$W/hog.kv" 2>&1 &
  hpid=$!
  PIDS+=("$hpid")
  wait_file "$W/hog.ready" 10 || log "  WARNING: hog not ready"
  sleep 0.5
  helper tftpget "$T_ADDR" "$T_PORT" "$T_FILE" "$LEGIT_N" 1 10 --src 127.0.0.3 >"$W/tlegit.kv"
  record "$tgt" tftphog rss_during "$rep" "$(rss_kb "$SRV_PID")" kB
  wait_pid "$hpid" $((HOG_S + 10))
  record_kv "$tgt" tftphog "$rep" legit_ "$W/tlegit.kv" attempts:count ok:count success_rate:ratio busy:count timeouts:count p50_ms:ms max_ms:ms
  record_kv "$tgt" tftphog "$rep" hog_ "$W/hog.kv" requests:count accepted:count busy:count silent:count
  cp "$W/tlegit.kv" "$RAW/tftphog-$tgt-$rep-legit.kv"
  cp "$W/hog.kv" "$RAW/tftphog-$tgt-$rep-hog.kv"
  stop_pid "$SRV_PID"
}

# ====================================================================== dnslog
D_CRC=127.0.43.2 D_KNOT=127.0.43.3 D_PORT=15353 D_SRC=127.0.0.2

dnslog_setup() {
  [[ -d $W/knot ]] && return 0
  command -v knotd >/dev/null || die "missing knotd (apt-get install knot)"
  mkdir -p "$W/knot"
  cat >"$W/crc-dns.yaml" <<EOF
name: bench
baseDomain: crc.testing
network: { cidr: 127.0.43.0/24, gateway: 127.0.43.1, applianceIP: $D_CRC }
nodes:
  - { name: master-0, role: master, mac: "52:54:00:2b:00:0b", ip: 127.0.43.11 }
dns: { listen: ["$D_CRC:$D_PORT"] }
dhcp: { enabled: false }
loadBalancer: { enabled: false }
http: { enabled: false }
admin: { enabled: false }
EOF
  cat >"$W/knot/bench.zone" <<EOF
\$ORIGIN bench.crc.testing.
\$TTL 30
@ SOA ns1 hostmaster 1 3600 600 86400 30
@ NS ns1
ns1 A $D_KNOT
api A $D_CRC
master-0 A 127.0.43.11
EOF
  cat >"$W/knot/knot.conf" <<EOF
server:
    listen: $D_KNOT@$D_PORT
    identity: ""
    version: ""
    rundir: "$W/knot"
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: info
database:
    storage: "$W/knot"
template:
  - id: default
    storage: "$W/knot"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
zone:
  - domain: bench.crc.testing
    file: "$W/knot/bench.zone"
EOF
  cp "$W/crc-dns.yaml" "$W/knot/knot.conf" "$RAW/"
}

dnslog_cell() { # TARGET REP
  local tgt=$1 rep=$2 addr bin logf pid kind l0 l1 b0 b1
  case $tgt in
    crc | crc-before)
         addr=$D_CRC bin=$CRC_BIN
         [[ $tgt == crc-before ]] && bin=$CRC_BEFORE_BIN
         start_bg "dns-$tgt" "$SUT_CPU" env -u RUST_LOG "$bin" serve --cluster "$W/crc-dns.yaml" ;;
    knot) addr=$D_KNOT
          start_bg "dns-knot" "$SUT_CPU" knotd -c "$W/knot/knot.conf" ;;
  esac
  pid=$BG_PID logf=$W/dns-$tgt.log
  wait_tcp "$addr" "$D_PORT" 10 || die "$tgt did not listen: $(tail -5 "$logf")"
  sleep 1
  for kind in $DNSLOG_KINDS; do
    l0=$(wc -l <"$logf") b0=$(stat -c %s "$logf")
    helper udpflood "$addr" "$D_PORT" "$DNSLOG_N" "$kind" --src "$D_SRC" >"$W/udp.kv"
    sleep "$DNSLOG_SETTLE"
    l1=$(wc -l <"$logf") b1=$(stat -c %s "$logf")
    record "$tgt" "dnslog_$kind" log_lines "$rep" $((l1 - l0)) lines
    record "$tgt" "dnslog_$kind" log_bytes "$rep" $((b1 - b0)) B
    record "$tgt" "dnslog_$kind" lines_naming_client "$rep" \
      "$(sed -n "$((l0 + 1)),${l1}p" "$logf" | grep -cE "${D_SRC//./\\.}[:@]" || true)" lines
    record_kv "$tgt" "dnslog_$kind" "$rep" "" "$W/udp.kv" sent:datagrams answered:datagrams
    # its first 20 lines (sed quits by itself: no SIGPIPE under pipefail)
    sed -n "$((l0 + 1)),$((l0 + 20))p;$((l0 + 20))q" "$logf" >"$RAW/dnslog-$tgt-$rep-$kind.head"
  done
  stop_pid "$pid"
  cp "$logf" "$RAW/dnslog-$tgt-$rep.log"
}

# ====================================================================== main
for scen in $SCENARIOS; do
  case $scen in
    lb)
      lb_setup
      targets=(crc)
      for v in $HAPROXY_VARIANTS; do targets+=("haproxy-$v"); done
      ;;
    slowloris | ignition | h2idle | slowmulti | nofile | ignnodes) http_setup; targets=(crc nginx) ;;
    tftphog)
      tftp_setup
      targets=(crc tftpd-hpa)
      [[ -n ${CRC_BEFORE_BIN:-} ]] && targets=(crc-before crc tftpd-hpa)
      ;;
    dnslog) dnslog_setup; targets=(crc knot)
            [[ -n ${CRC_BEFORE_BIN:-} ]] && targets=(crc-before crc knot) ;;
    *) die "unknown scenario $scen" ;;
  esac
  for ((rep = 1; rep <= REPS; rep++)); do
    for t in "${targets[@]}"; do
      log "$scen rep $rep: $t (loadavg $(cut -d' ' -f1 /proc/loadavg))"
      case $scen in
        lb) lb_cell "$t" "$rep" ;;
        slowloris) slowloris_cell "$t" "$rep" ;;
        ignition) ignition_cell "$t" "$rep" ;;
        tftphog) tftphog_cell "$t" "$rep" ;;
        h2idle) h2idle_cell "$t" "$rep" ;;
        slowmulti) slowmulti_cell "$t" "$rep" ;;
        nofile) nofile_cell "$t" "$rep" ;;
        ignnodes) ignnodes_cell "$t" "$rep" ;;
        dnslog) dnslog_cell "$t" "$rep" ;;
      esac
    done
  done
done
echo "loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RAW/versions.txt"
