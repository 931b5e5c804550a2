#!/usr/bin/env bash
# bench/memory.sh - RSS of crc-appliance's DNS-only, LB-only and HTTP-only
# serve against Knot, HAProxy and nginx (issue #22 item 11), optionally with
# a "before" binary in the same run. Results: bench/RESULTS-memory.md.
#
# 1. Breakdown (bench/smaps.py): each crc binary runs each bench target
#    (bench/targets/<area>.sh, pinned to SUT_CPU) and /proc/PID/smaps is split
#    into the executable, libc & co, the other shared libraries (libvirt's),
#    heap/anonymous and the stack; idle, and for DNS also after a 10 s dnsperf
#    run of the harness's query mix (that fills the packet cache, which is
#    what the harness's RSS figure is taken after).
# 2. The shared harness itself (dns.sh, lb.sh, http.sh) with the peer and the
#    crc binaries as targets, REPS=1, FAILOVER=0, DL_RUNS=1, then the RSS
#    columns of its TSVs: dns max:server_rss (after the max-rate run), lb
#    small_ka:lb_rss (after the keep-alive run), http idle:server_rss and the
#    peaks during the 1 GiB downloads.
#
# USAGE: bench/memory.sh
# ENV: CRC_BIN (default target/release/crc-appliance), CRC_OLD_BIN (a
#   "before" build, target crcold; unset = none), CRC_TARGETS ("NAME=BINARY
#   ..." instead of the two: any set of builds, e.g. one without libvirt), AREAS ("dns lb http"),
#   PHASES ("breakdown harness"), SHARED_BENCH, RESULTS_DIR, SUT_CPU (0),
#   CLIENT_CPU (1). Only 127.0.0.1 is used; every process is stopped by PID.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHARED_BENCH:-$repo/../shared/bench}
new=${CRC_BIN:-$repo/target/release/crc-appliance}
old=${CRC_OLD_BIN:-}
areas=${AREAS:-dns lb http}
phases=${PHASES:-breakdown harness}
sut=${SUT_CPU:-0} cli=${CLIENT_CPU:-1}
export RESULTS_DIR=${RESULTS_DIR:-$repo/bench/results}
mkdir -p "$RESULTS_DIR"
work=$(mktemp -d /tmp/crc-memory.XXXXXX)
pid=
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

bins=()
if [[ -n ${CRC_TARGETS:-} ]]; then
  read -r -a bins <<<"$CRC_TARGETS"
else
  [[ -n $old ]] && bins+=("crcold=$old")
  bins+=("crc=$new")
fi
for nb in "${bins[@]}"; do
  [[ -x ${nb#*=} ]] || { echo "no ${nb#*=}: cargo build --release first" >&2; exit 1; }
done

# wait_tcp PORT: until 127.0.0.1:PORT accepts (at most 10 s).
wait_tcp() {
  local i
  for ((i = 0; i < 100; i++)); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on 127.0.0.1:$1" >&2; return 1
}

breakdown() {
  local area=$1 label bin port=18199 w
  for nb in "${bins[@]}"; do
    label=${nb%%=*} bin=${nb#*=}
    w=$work/$area-$label; mkdir -p "$w"
    case $area in
      dns) args=("127.0.0.1:$port" "$w") ;;
      lb) args=("127.0.0.1:$port" "127.0.0.1:18197,127.0.0.1:18198" 1000 2 2 "$w") ;;
      http)
        mkdir -p "$w/doc"
        head -c 1800 /dev/zero | tr '\0' x >"$w/doc/master.ign"
        head -c 1M /dev/zero >"$w/doc/rhcos.raw"
        args=("127.0.0.1:$port" "$w/doc" "$w") ;;
    esac
    CRC_BIN=$bin RUST_LOG=warn taskset -c "$sut" "$repo/bench/targets/$area.sh" "${args[@]}" \
      >"$w/log" 2>&1 &
    pid=$!
    wait_tcp "$port"; sleep 1
    python3 "$repo/bench/smaps.py" "$pid" "$area:$label:idle"
    if [[ $area == dns ]]; then
      python3 "$shared/tools/dnsmix.py" mycluster.example.com 2.0.192.in-addr.arpa 50000 >"$w/q.txt"
      taskset -c "$cli" timeout 30 dnsperf -s 127.0.0.1 -p "$port" -d "$w/q.txt" \
        -c 4 -T 1 -q 100 -l 10 -t 2 >"$w/dnsperf.txt" 2>&1 || true
      python3 "$repo/bench/smaps.py" "$pid" "$area:$label:after-10s-dnsperf"
    fi
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  done
}

harness() {
  local area=$1 peer placeholders tsv cols
  case $area in
    dns) peer=knot placeholders="{addr}:{port} {workdir}" cols="max:server_rss" ;;
    lb) peer=haproxy placeholders="{addr}:{port} {backends} {inter_ms} {fall} {rise} {workdir}"
        cols="small_ka:lb_rss" ;;
    http) peer=nginx placeholders="{addr}:{port} {docroot} {workdir}"
          cols="idle:server_rss big_1x:server_peak_rss big_1x:server_peak_rss_anon big_4x:server_peak_rss" ;;
  esac
  local targets=("$peer")
  for nb in "${bins[@]}"; do
    targets+=("${nb%%=*}=env CRC_BIN=${nb#*=} $repo/bench/targets/$area.sh $placeholders")
  done
  REPS=1 FAILOVER=0 DL_RUNS=1 "$shared/$area.sh" "${targets[@]}" >"$work/$area-harness.log" 2>&1 ||
    { tail -20 "$work/$area-harness.log" >&2; return 1; }
  tsv=$RESULTS_DIR/$area-latest.tsv
  echo "## $area ($tsv)"
  # shellcheck disable=SC2086
  (cd "$shared/tools" && python3 pivot.py "$tsv" $cols)
}

if [[ " $phases " == *" breakdown "* ]]; then
  printf 'label\ttotal_kB\tbinary\tbaselibs\totherlibs\theap\tstack\tother\tthreads\n'
  for a in $areas; do breakdown "$a"; done
fi
if [[ " $phases " == *" harness "* ]]; then
  for a in $areas; do harness "$a"; done
fi
