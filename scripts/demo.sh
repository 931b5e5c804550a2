#!/usr/bin/env bash
# Run the appliance on the bundled demo cluster: loopback, high ports, no
# root, libvirt test:///default. Installs missing system packages first.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/prereqs.sh
mkdir -p /tmp/crc-appliance-demo
exec cargo run --release -- serve --cluster configs/demo.yaml
