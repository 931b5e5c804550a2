#!/usr/bin/env bash
# bench/registry.sh - the mirror registry (issue #36 item 9) against Debian's
# docker-registry, in one run, on ONE storage tree both serve (the
# distribution filesystem layout, written here: a BLOB_MB blob, its config
# and a manifest tagged bench/big:v1), both over TLS with the same
# certificate, in a network namespace of this script's own (10.78.0.1).
#
# Figures, per server: blob GET MiB/s with 1 and CONC clients (curl, whole
# blob, size checked) and the server's CPU seconds per GiB it sent in those
# runs (what the server costs per byte, whoever else shares the cores),
# manifest GET req/s (ab -k, CONC connections, REQS
# requests) and CPU microseconds per manifest request (the server's
# utime+stime over the ab run), RSS idle and the peak RSS sampled while
# CONC clients pull. Targets (issue #36): crc >= 1.5x docker-registry's blob
# MiB/s, >= 2x its manifest req/s, RSS no more than its own.
#
# A figure of 0 (a server that did not answer, a short body) fails the run
# (exit 1) with the row named: it is a broken setup, not a result.
# Clients and servers share the machine's cores: the figures compare the
# two servers in the same conditions, they are not absolute.
#
# Needs root (network namespace), target/release/crc-appliance (built if
# missing), docker-registry curl ab openssl python3 ip.
# USAGE: bench/registry.sh      ENV: BLOB_MB (1024) CONC (8) REQS (20000)
#   REPS (1: best of) KEEP (1: keep the work dir) RESULTS_DIR
#   CURL_PROTO (e.g. --http1.1: the blob clients' protocol for both servers;
#   default: what each server negotiates, h2 for docker-registry, HTTP/1.1
#   for crc, which offers only that).
set -euo pipefail
BLOB_MB=${BLOB_MB:-1024}
CONC=${CONC:-8}
REQS=${REQS:-20000}
REPS=${REPS:-1}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$repo/target/release/crc-appliance
RESULTS_DIR=${RESULTS_DIR:-$repo/bench/results}
IP=10.78.0.1
CRC_PORT=5000
DR_PORT=5001

die() { echo "bench/registry: $*" >&2; exit 1; }
[[ $EUID -eq 0 ]] || die "needs root (it makes a network namespace)"
for t in docker-registry curl ab openssl python3 ip; do
  command -v "$t" >/dev/null || die "$t is not installed"
done
[[ -x $bin ]] || (cd "$repo" && cargo build --release --bin crc-appliance)

work=$(mktemp -d /tmp/bench-registry.XXXXXX)
ns=crcbench-reg-$$
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  ip netns del "$ns" 2>/dev/null || true
  [[ ${KEEP:-0} == 1 ]] || rm -rf "$work"
}
trap cleanup EXIT
nsx() { ip netns exec "$ns" "$@"; }

ip netns add "$ns"
nsx ip link set lo up
nsx ip addr add "$IP/24" dev lo

# The storage tree, as docker-registry writes it.
python3 - "$work/storage" "$BLOB_MB" <<'PY'
import hashlib, json, os, sys
root = os.path.join(sys.argv[1], "docker/registry/v2")
mb = int(sys.argv[2])
def blob(data_path_writer):
    tmp = os.path.join(root, "tmp-blob")
    os.makedirs(root, exist_ok=True)
    h, n = data_path_writer(tmp)
    d = h.hexdigest()
    dest = os.path.join(root, "blobs/sha256", d[:2], d)
    os.makedirs(dest, exist_ok=True)
    os.rename(tmp, os.path.join(dest, "data"))
    return "sha256:" + d, n
def big(tmp):
    h, n = hashlib.sha256(), 0
    chunk = os.urandom(1 << 20)
    with open(tmp, "wb") as f:
        for i in range(mb):
            c = bytes([i & 255]) + chunk[1:]
            h.update(c); f.write(c); n += len(c)
    return h, n
def small(b):
    def w(tmp):
        open(tmp, "wb").write(b)
        return hashlib.sha256(b), len(b)
    return w
def link(path, d):
    os.makedirs(path, exist_ok=True)
    open(os.path.join(path, "link"), "w").write(d)
layer, lsize = blob(big)
cfg = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": [layer]}}).encode()
config, csize = blob(small(cfg))
man = json.dumps({"schemaVersion": 2,
    "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
    "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": csize, "digest": config},
    "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": lsize, "digest": layer}]}).encode()
manifest, _ = blob(small(man))
repo = os.path.join(root, "repositories/bench/big")
for d in (layer, config):
    link(os.path.join(repo, "_layers/sha256", d[7:]), d)
link(os.path.join(repo, "_manifests/revisions/sha256", manifest[7:]), manifest)
link(os.path.join(repo, "_manifests/tags/v1/current"), manifest)
link(os.path.join(repo, "_manifests/tags/v1/index/sha256", manifest[7:]), manifest)
open(os.path.join(sys.argv[1], "layer"), "w").write(f"{layer} {lsize}\n")
PY
read -r LAYER LAYER_SIZE <"$work/storage/layer"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=bench -addext "subjectAltName=IP:$IP" \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

cat >"$work/cluster.yaml" <<EOF
name: bench
baseDomain: crc.testing
network:
  cidr: 10.78.0.0/24
  gateway: 10.78.0.254
  applianceIP: $IP
nodes:
  - { name: bootstrap, role: bootstrap, mac: "52:54:00:15:00:05", ip: 10.78.0.5 }
  - { name: master-0, role: master, mac: "52:54:00:15:00:0a", ip: 10.78.0.10 }
  - { name: master-1, role: master, mac: "52:54:00:15:00:0b", ip: 10.78.0.11 }
  - { name: master-2, role: master, mac: "52:54:00:15:00:0c", ip: 10.78.0.12 }
dhcp:
  enabled: false
  leaseFile: $work/leases.json
loadBalancer:
  enabled: false
http:
  enabled: false
admin:
  listen: 127.0.0.1:9180
registry:
  listen: $IP:$CRC_PORT
  storage: $work/storage
  tls: { certFile: $work/cert.pem, keyFile: $work/key.pem }
EOF
cat >"$work/registry.yml" <<EOF
version: 0.1
log: { level: error, accesslog: { disabled: true } }
storage: { filesystem: { rootdirectory: $work/storage }, cache: { blobdescriptor: inmemory } }
http:
  addr: $IP:$DR_PORT
  tls: { certificate: $work/cert.pem, key: $work/key.pem }
EOF

# ip netns exec execs the server: $! is its PID (a shell function would
# leave a subshell's).
RUST_LOG=warn ip netns exec "$ns" "$bin" serve --cluster "$work/cluster.yaml" >"$work/crc.log" 2>&1 &
pids+=($!); CRC_PID=$!
ip netns exec "$ns" docker-registry serve "$work/registry.yml" >"$work/docker-registry.log" 2>&1 &
pids+=($!); DR_PID=$!

ready() {
  local i
  for i in $(seq 100); do
    nsx curl -sk -o /dev/null "https://$IP:$1/v2/" && return 0
    sleep 0.2
  done
  die "the server on port $1 did not answer (logs in $work, KEEP=1 keeps them)"
}
ready $CRC_PORT
ready $DR_PORT

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# blob_mibs PORT CLIENTS PID: MiB/s of CLIENTS whole-blob GETs at once;
# leaves the peak RSS seen (KiB) in $work/peak and the server's CPU seconds
# per GiB sent (utime+stime over the run) in $work/cpu.
blob_mibs() {
  local port=$1 n=$2 pid=$3 i t0 t1 peak=0 r c0 c1
  c0=$(cpu_ticks "$pid")
  t0=$(date +%s.%N)
  # Each client notes when it finished: the RSS loop below wakes every
  # 0.2 s, which would round a one-second transfer up by as much as a
  # fifth (and cap a fast server's figure).
  for i in $(seq "$n"); do
    { nsx curl -sk ${CURL_PROTO:-} -o /dev/null -w '%{size_download}\n' \
        "https://$IP:$port/v2/bench/big/blobs/$LAYER" >"$work/got.$i"
      date +%s.%N >"$work/end.$i"; } &
  done
  while [[ $(jobs -rp | wc -l) -gt 0 ]]; do
    r=$(rss_kib "$pid"); ((r > peak)) && peak=$r
    sleep 0.2
  done
  wait
  t1=$(cat "$work"/end.* | sort -g | tail -1)
  rm -f "$work"/end.*
  c1=$(cpu_ticks "$pid")
  echo "$peak" >"$work/peak"
  python3 -c "print(round(($c1 - $c0) / $(getconf CLK_TCK) / ($n * $LAYER_SIZE / 1073741824), 3))" >"$work/cpu"
  for i in $(seq "$n"); do
    [[ $(cat "$work/got.$i") == "$LAYER_SIZE" ]] || { echo 0; return; }
  done
  python3 -c "print(round($n * $LAYER_SIZE / 1048576 / ($t1 - $t0), 1))"
}

# manifest PORT PID: "req/s cpu_us_per_request"
manifest() {
  local port=$1 pid=$2 c0 c1 out rps done_
  c0=$(cpu_ticks "$pid")
  out=$(nsx ab -k -q -n "$REQS" -c "$CONC" \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    "https://$IP:$port/v2/bench/big/manifests/v1" 2>&1) || true
  c1=$(cpu_ticks "$pid")
  rps=$(awk '/^Requests per second:/ {print $4}' <<<"$out")
  done_=$(awk '/^Complete requests:/ {print $3}' <<<"$out")
  local failed
  failed=$(awk '/^(Failed requests|Non-2xx responses):/ {s += $NF} END {print s + 0}' <<<"$out")
  if [[ -z $rps || $done_ != "$REQS" || $failed != 0 ]]; then
    echo "0 0"; return
  fi
  python3 -c "print($rps, round(($c1 - $c0) * 1e6 / $(getconf CLK_TCK) / $REQS, 1))"
}

best() { sort -g | tail -1; }
least() { sort -g | head -1; }

declare -A R
for who in crc docker-registry; do
  if [[ $who == crc ]]; then port=$CRC_PORT; pid=$CRC_PID; else port=$DR_PORT; pid=$DR_PID; fi
  nsx curl -sk -o /dev/null "https://$IP:$port/v2/bench/big/manifests/v1"
  # Warm-up, not measured: the page cache, and crc hashes a blob on its
  # first read after a start (it never serves one that does not match).
  nsx curl -sk -o /dev/null "https://$IP:$port/v2/bench/big/blobs/$LAYER"
  R[$who.rss_idle]=$(rss_kib "$pid")
  # The server's CPU per GiB: the least of the repetitions (work done,
  # so less sensitive to the other load than MiB/s).
  R[$who.blob1]=$(for _ in $(seq "$REPS"); do blob_mibs "$port" 1 "$pid"; cat "$work/cpu" >>"$work/cpu1.$who"; done | best)
  R[$who.cpu1]=$(least <"$work/cpu1.$who")
  R[$who.blobN]=$(for _ in $(seq "$REPS"); do blob_mibs "$port" "$CONC" "$pid"; cat "$work/cpu" >>"$work/cpuN.$who"; done | best)
  R[$who.cpuN]=$(least <"$work/cpuN.$who")
  R[$who.rss_pull]=$(cat "$work/peak")
  read -r R[$who.mrps] R[$who.mcpu] < <(manifest "$port" "$pid")
done

mkdir -p "$RESULTS_DIR"
tsv=$RESULTS_DIR/registry-latest.tsv
{
  printf 'figure\tcrc\tdocker-registry\tunit\n'
  printf 'blob GET, 1 client\t%s\t%s\tMiB/s\n' "${R[crc.blob1]}" "${R[docker-registry.blob1]}"
  printf 'blob GET, %s clients\t%s\t%s\tMiB/s\n' "$CONC" "${R[crc.blobN]}" "${R[docker-registry.blobN]}"
  printf 'server CPU per GiB sent, 1 client\t%s\t%s\ts\n' "${R[crc.cpu1]}" "${R[docker-registry.cpu1]}"
  printf 'server CPU per GiB sent, %s clients\t%s\t%s\ts\n' "$CONC" "${R[crc.cpuN]}" "${R[docker-registry.cpuN]}"
  printf 'manifest GET (%s conns)\t%s\t%s\treq/s\n' "$CONC" "${R[crc.mrps]}" "${R[docker-registry.mrps]}"
  printf 'CPU per manifest GET\t%s\t%s\tus\n' "${R[crc.mcpu]}" "${R[docker-registry.mcpu]}"
  printf 'RSS idle\t%s\t%s\tKiB\n' "${R[crc.rss_idle]}" "${R[docker-registry.rss_idle]}"
  printf 'RSS peak, %s clients pulling\t%s\t%s\tKiB\n' "$CONC" "${R[crc.rss_pull]}" "${R[docker-registry.rss_pull]}"
} >"$tsv"
column -t -s $'\t' "$tsv"
echo "(blob ${BLOB_MB} MiB, $(nproc) CPUs shared by clients and servers, load $(cut -d' ' -f1-3 /proc/loadavg); $tsv)"

python3 - "$tsv" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
zero = [r[0] for r in rows if r[3] in ("MiB/s", "req/s") and (float(r[1]) == 0 or float(r[2]) == 0)]
if zero:
    sys.exit("bench/registry: FAILED: a figure is 0 (a broken setup, see the logs; KEEP=1): " + ", ".join(zero))
f = {r[0]: (float(r[1]), float(r[2])) for r in rows}
def ratio(k):
    c, d = f[k]
    return c / d if d else float("inf")
checks = [
    (k, ratio(k), 1.5) for k in f if k.startswith("blob GET")
] + [(k, ratio(k), 2.0) for k in f if k.startswith("manifest GET")]
for k, r, want in checks:
    print(f"{'MET ' if r >= want else 'MISS'} {k}: crc/docker-registry = {r:.2f} (target >= {want})")
for k in f:
    if k.startswith("RSS"):
        c, d = f[k]
        print(f"{'MET ' if c <= d else 'MISS'} {k}: crc {c:.0f} KiB, docker-registry {d:.0f} KiB (target: no more)")
PY
