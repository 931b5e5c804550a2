#!/usr/bin/env bash
# Run the appliance on the bundled demo cluster (configs/demo.yaml): DNS,
# DHCP, load balancer, HTTP and admin on loopback high ports, no root, and
# libvirt's test:///default driver for the VMs (nothing really boots).
#
# Installs only what the demo needs — xorriso (the placeholder live ISO) and
# the libvirt client library to build against (pkg-config, libvirt-dev /
# libvirt-devel) — with apt-get or dnf, then builds (or reuses) the release
# binary. The test toolchain is ./scripts/test.sh's business.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
missing=()
command -v xorriso >/dev/null || missing+=(xorriso)
if ! pkg-config --exists libvirt 2>/dev/null; then
  if command -v apt-get >/dev/null; then
    missing+=(pkg-config libvirt-dev)
  else
    missing+=(pkgconf-pkg-config libvirt-devel)
  fi
fi
if ((${#missing[@]})); then
  echo "demo: installing ${missing[*]}" >&2
  if command -v apt-get >/dev/null; then
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  elif command -v dnf >/dev/null; then
    $sudo dnf install -y "${missing[@]}"
  else
    echo "demo: please install ${missing[*]} (no apt-get or dnf found)" >&2
    exit 1
  fi
fi

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

if [ -n "${CRC_APPLIANCE_BIN:-}" ]; then
  # A binary built elsewhere (tests/demo_chroot.rs passes the test build).
  bin=$CRC_APPLIANCE_BIN
else
  command -v cargo >/dev/null || { echo "demo: install Rust (rustup) first" >&2; exit 1; }
  # Incremental: a no-op when the binary is up to date.
  cargo build --release --quiet
  bin=./target/release/crc-appliance
fi
cat >&2 <<TRY
crc-appliance demo: configs/demo.yaml on loopback. Try, in another shell:
    dig @127.0.0.1 -p 15353 api.demo.crc.testing
    dig @127.0.0.1 -p 15353 foo.apps.demo.crc.testing
    dig @127.0.0.1 -p 15353 -x 127.0.10.10
    curl -s http://127.0.0.1:18080/ignition/master-0.ign
    curl -s http://127.0.0.1:19180/status              # the page: http://127.0.0.1:19180/
    $bin --cluster configs/demo.yaml lb status
    $bin --cluster configs/demo.yaml reload
Stop with Ctrl-C.
TRY
exec "$bin" serve --cluster configs/demo.yaml
