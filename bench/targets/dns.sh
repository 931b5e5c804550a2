#!/usr/bin/env bash
# bench/targets/dns.sh ADDR:PORT WORKDIR - the crc-appliance DNS target for the
# shared harness (dns.sh). Writes a cluster file whose plan serves the same data
# as the harness's {zonefile}/{revzonefile} (mycluster.example.com and
# 2.0.192.in-addr.arpa, TTL 300, 192.0.2.0/24 TEST-NET-1 data that is only ever
# answered), with only DNS enabled, then execs the release binary in the
# foreground (so the harness's PID is the server; SIGTERM stops it).
# Env: CRC_BIN = the binary to run (default: target/release/crc-appliance).
set -eu
listen=$1 workdir=$2
repo=$(cd "$(dirname "$0")/../.." && pwd)
cfg=$workdir/crc-dns-cluster.yaml
cat >"$cfg" <<YAML
name: mycluster
baseDomain: example.com
network:
  cidr: 192.0.2.0/24
  gateway: 192.0.2.1
  applianceIP: 192.0.2.2
  apiVIP: 192.0.2.5
  ingressVIP: 192.0.2.5
nodes:
  - { name: bootstrap, role: bootstrap, mac: "52:54:00:00:02:0a", ip: 192.0.2.10 }
  - { name: master-0,  role: master,    mac: "52:54:00:00:02:0b", ip: 192.0.2.11 }
  - { name: master-1,  role: master,    mac: "52:54:00:00:02:0c", ip: 192.0.2.12 }
  - { name: master-2,  role: master,    mac: "52:54:00:00:02:0d", ip: 192.0.2.13 }
  - { name: worker-0,  role: worker,    mac: "52:54:00:00:02:15", ip: 192.0.2.21 }
  - { name: worker-1,  role: worker,    mac: "52:54:00:00:02:16", ip: 192.0.2.22 }
dns:
  listen: ["$listen"]
  ttl: 300s
  negativeTtl: 300s
dhcp:
  enabled: false
loadBalancer:
  enabled: false
http:
  enabled: false
admin:
  enabled: false
YAML
exec "${CRC_BIN:-$repo/target/release/crc-appliance}" serve --cluster "$cfg"
