#!/usr/bin/env bash
# bench/targets/lb.sh - run crc-appliance as the "crc" target of the shared
# lb.sh harness: turn its placeholders into a cluster file whose ingress-http
# pool holds the harness backends, then exec the release binary.
#
# USAGE: lb.sh ADDR:PORT BACKENDS INTER_MS FALL RISE WORKDIR
#   BACKENDS = host:port,host:port  (the harness's b1,b2)
# The backends share one IP (127.0.0.1) with different ports, which node IPs
# cannot express, so each becomes a worker node (b1, b2, ... on
# 127.0.30.0/24, never contacted) with loadBalancer.backendOverrides pointing
# its ingress-http backend at the real address. The check is TCP connect, as
# the harness expects. The other frontends listen on 127.0.0.1:0; their
# backends (127.0.30.x) refuse connections and stay unhealthy. DNS, DHCP,
# HTTP and admin are off.
set -eu
listen=$1 backends=$2 inter_ms=$3 fall=$4 rise=$5 workdir=$6
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=${CRC_BIN:-$here/target/release/crc-appliance}
timeout_ms=$(( inter_ms < 1000 ? inter_ms : 1000 ))
f="$workdir/crc-lb-cluster.yaml"
{
  cat <<EOY
name: bench
baseDomain: crc.testing
network: { cidr: 127.0.30.0/24, gateway: 127.0.30.1, applianceIP: 127.0.30.1 }
nodes:
  - { name: master-0, role: master, mac: "52:54:00:1e:00:0a", ip: 127.0.30.10 }
EOY
  i=0
  IFS=, read -ra list <<<"$backends"
  for b in "${list[@]}"; do
    i=$((i+1))
    printf '  - { name: b%d, role: worker, mac: "52:54:00:1e:00:%02x", ip: 127.0.30.%d }\n' "$i" $((0x20+i)) $((20+i))
  done
  cat <<EOY
dns: { enabled: false }
dhcp: { enabled: false }
http: { enabled: false }
admin: { enabled: false }
loadBalancer:
  listen: { api: "127.0.0.1:0", machineConfig: "127.0.0.1:0", ingressHttp: "$listen", ingressHttps: "127.0.0.1:0" }
  healthCheck: { interval: ${inter_ms}ms, timeout: ${timeout_ms}ms, rise: $rise, fall: $fall }
  connectTimeout: 2s
  backendOverrides:
EOY
  i=0
  for b in "${list[@]}"; do
    i=$((i+1))
    printf '    b%d: { ingressHttp: "%s" }\n' "$i" "$b"
  done
} >"$f"
export RUST_LOG=${RUST_LOG:-warn,crc_appliance=info}
exec "$bin" serve --cluster "$f"
