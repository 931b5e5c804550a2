#!/usr/bin/env bash
# Run the appliance on the bundled demo cluster (configs/demo.yaml): DNS,
# DHCP, load balancer, HTTP and admin on loopback high ports, no root, and
# libvirt's test:///default driver for the VMs (nothing really boots).
# Installs missing system packages first.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/prereqs.sh
demo=/tmp/crc-appliance-demo
mkdir -p "$demo"
if [ ! -s "$demo/rhcos-live.x86_64.iso" ]; then
  # A placeholder "live ISO" with the layout of the RHCOS one, so that the
  # libvirt driver has a kernel, initramfs and rootfs to read out of it.
  tree=$(mktemp -d)
  mkdir -p "$tree/images/pxeboot"
  for f in vmlinuz initrd.img rootfs.img; do echo "demo $f" >"$tree/images/pxeboot/$f"; done
  xorriso -as mkisofs -quiet -V rhcos-demo -R -J -o "$demo/rhcos-live.x86_64.iso" "$tree"
  rm -rf "$tree"
fi
exec cargo run --release -- serve --cluster configs/demo.yaml
