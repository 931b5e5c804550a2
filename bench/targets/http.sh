#!/usr/bin/env bash
# bench/targets/http.sh ADDR:PORT DOCROOT WORKDIR - the crc-appliance HTTP
# target for the shared harness (http.sh). The harness requests /rhcos.raw and
# /master.ign at the root of the URL space: crc-appliance serves the flat
# aliases /<path> (= /images/<path>) and /<name>.ign (= /ignition/<name>.ign,
# same access rule): imagesDir is DOCROOT and ignitionDir a copy of its *.ign
# (the two may not overlap: /images never serves ignition). The
# harness's client is 127.0.0.1 (loopback), which may fetch ignition. Only HTTP
# is enabled; RUST_LOG=warn keeps the per-fetch ignition log line out of the
# wrk run. Execs the release binary in the foreground (the harness's PID is
# the server; SIGTERM stops it).
# Env: CRC_BIN = the binary to run (default: target/release/crc-appliance).
set -eu
listen=$1 docroot=$2 workdir=$3
repo=$(cd "$(dirname "$0")/../.." && pwd)
cfg=$workdir/crc-http-cluster.yaml
ign=$workdir/crc-http-ignition
mkdir -p "$ign"
cp "$docroot"/*.ign "$ign"/ 2>/dev/null || true
cat >"$cfg" <<YAML
name: mycluster
baseDomain: example.com
network:
  cidr: 192.0.2.0/24
  gateway: 192.0.2.1
  applianceIP: 192.0.2.2
nodes:
  - { name: bootstrap, role: bootstrap, mac: "52:54:00:00:02:0a", ip: 192.0.2.10 }
  - { name: master-0,  role: master,    mac: "52:54:00:00:02:0b", ip: 192.0.2.11 }
  - { name: worker-0,  role: worker,    mac: "52:54:00:00:02:15", ip: 192.0.2.21 }
dns:
  enabled: false
dhcp:
  enabled: false
loadBalancer:
  enabled: false
http:
  listen: "$listen"
  imagesDir: "$docroot"
  ignitionDir: "$ign"
admin:
  enabled: false
YAML
export RUST_LOG=${RUST_LOG:-warn}
exec "${CRC_BIN:-$repo/target/release/crc-appliance}" serve --cluster "$cfg"
