#!/usr/bin/env bash
# Build a Debian package of crc-appliance with dpkg-deb only (no cargo-deb,
# no debhelper): stage the install tree, write DEBIAN/, `dpkg-deb --build`.
#
#   scripts/package.sh [--binary PATH] [--out DIR]
#
# Without --binary, builds `cargo build --release --locked` first. The
# package's Depends follow the binary: libvirt0 only when it links
# libvirt.so.0 (a --no-default-features build does not).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="" out="$root/dist"
while (($#)); do
  case "$1" in
    --binary) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--binary PATH] [--out DIR]" >&2; exit 2 ;;
  esac
done
if [ -z "$bin" ]; then
  (cd "$root" && cargo build --release --locked)
  bin="${CARGO_TARGET_DIR:-$root/target}/release/crc-appliance"
fi
[ -x "$bin" ] || { echo "not an executable: $bin" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)
arch=$(dpkg --print-architecture)
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg="$stage/crc-appliance"

install -D -m 0755 "$bin" "$pkg/usr/bin/crc-appliance"
install -D -m 0644 "$root/systemd/crc-appliance.service" "$pkg/usr/lib/systemd/system/crc-appliance.service"
install -D -m 0644 "$root/systemd/crc-appliance.sysusers" "$pkg/usr/lib/sysusers.d/crc-appliance.conf"
install -D -m 0644 "$root/packaging/firewalld/crc-appliance.xml" "$pkg/usr/lib/firewalld/services/crc-appliance.xml"
install -D -m 0644 "$root/configs/example.yaml" "$pkg/etc/crc-appliance/example.yaml"
doc="$pkg/usr/share/doc/crc-appliance"
install -d "$doc"
install -m 0644 "$root/README.md" "$doc/"
for f in install operations configuration libvirt; do
  install -m 0644 "$root/docs/$f.md" "$doc/"
done
cat > "$doc/copyright" <<COPY
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: crc-appliance
License: Apache-2.0

Files: *
License: Apache-2.0
 On Debian systems the full text is in /usr/share/common-licenses/Apache-2.0.
COPY
strip --strip-debug "$pkg/usr/bin/crc-appliance" 2>/dev/null || true

depends="libc6"
if { command -v readelf >/dev/null && readelf -d "$pkg/usr/bin/crc-appliance" | grep -q 'NEEDED.*libvirt\.so'; } ||
   { ! command -v readelf >/dev/null && grep -qa 'libvirt\.so\.0' "$pkg/usr/bin/crc-appliance"; }; then
  depends="$depends, libvirt0"
fi
install -d "$pkg/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
cat > "$pkg/DEBIAN/control" <<CTRL
Package: crc-appliance
Version: $version
Architecture: $arch
Maintainer: crc-appliance maintainers <crc-appliance@localhost>
Installed-Size: $size
Depends: $depends
Recommends: libvirt-daemon-system
Suggests: firewalld
Section: admin
Priority: optional
Description: DNS, DHCP, load balancer, HTTP and libvirt VMs for OpenShift 4 UPI
 One process providing the user-provisioned infrastructure of an OpenShift 4
 install: DNS, DHCPv4, the API/machine-config/ingress TCP load balancer, an
 HTTP server for RHCOS images and ignition files, and libvirt VMs.
CTRL
echo "/etc/crc-appliance/example.yaml" > "$pkg/DEBIAN/conffiles"
cat > "$pkg/DEBIAN/postinst" <<'POST'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  if command -v systemd-sysusers >/dev/null 2>&1; then
    systemd-sysusers crc-appliance.conf || true
  elif ! getent passwd crc-appliance >/dev/null; then
    getent group libvirt >/dev/null || addgroup --system libvirt
    adduser --system --group --home /var/lib/crc-appliance --no-create-home crc-appliance
    adduser crc-appliance libvirt
  fi
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
  fi
  if command -v firewall-cmd >/dev/null 2>&1 && firewall-cmd --state >/dev/null 2>&1; then
    firewall-cmd --reload >/dev/null || true
  fi
fi
exit 0
POST
cat > "$pkg/DEBIAN/prerm" <<'PRERM'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl stop crc-appliance.service >/dev/null 2>&1 || true
  systemctl disable crc-appliance.service >/dev/null 2>&1 || true
fi
exit 0
PRERM
chmod 0755 "$pkg/DEBIAN/postinst" "$pkg/DEBIAN/prerm"
deb="$out/crc-appliance_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$pkg" "$deb" >/dev/null
echo "$deb"
