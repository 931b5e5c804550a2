#!/usr/bin/env bash
# crates.io tools the tests run as real clients, built once into a cached
# root (/var/cache/crc-appliance-tests/cargo, or $CRC_TEST_TOOLS) with
# `cargo install --locked`. Called by scripts/test.sh after prereqs.sh,
# which installs their build dependencies (packages.txt: libzstd-dev,
# libssl-dev, pkg-config for coreos-installer).
#
# - coreos-installer 0.27.0 (tests/coreos_install.rs): the real installer,
#   `iso kargs show/modify`; the crate's own unmodified service script,
#   generator and fixture ISOs are kept next to it in
#   share/coreos-installer-0.27.0/ (copied from the crate source cargo
#   unpacked), so the tests never depend on ~/.cargo/registry.
set -euo pipefail
root=${CRC_TEST_TOOLS:-/var/cache/crc-appliance-tests/cargo}
# The tests that run these tools need root (namespaces, loop devices) and
# print SKIPPED without it: no build then.
if [ "$(id -u)" != 0 ]; then
  echo "test-tools: not root: coreos-installer not built (its tests skip)" >&2
  exit 0
fi
cargo_home=${CARGO_HOME:-$HOME/.cargo}

# install_crate CRATE VERSION BINARY [FILES...]: the binary into $root/bin,
# FILES (paths inside the crate) into $root/share/CRATE-VERSION/.
install_crate() {
  local crate=$1 version=$2 bin=$3
  shift 3
  local share="$root/share/$crate-$version" f src built=""
  find_src() { ls -d "$cargo_home"/registry/src/*/"$crate-$version" 2>/dev/null | head -n1; }
  build() {
    echo "building $crate $version into $root (once; cached)" >&2
    mkdir -p "$root"
    env "PATH=$PATH" "CARGO_HOME=$cargo_home" \
      cargo install "$crate" --version "$version" --locked --force --root "$root"
    built=1
  }
  "$root/bin/$bin" --version 2>/dev/null | grep -qF "$version" || build
  for f in "$@"; do
    [ -e "$share/$f" ] && continue
    src=$(find_src)
    # The crate source is gone (a restored cache): cargo fetches it again.
    if [ -z "$src" ] && [ -z "$built" ]; then build; src=$(find_src); fi
    [ -n "$src" ] || { echo "no source of $crate $version under $cargo_home/registry/src" >&2; exit 1; }
    mkdir -p "$(dirname "$share/$f")"
    cp -a "$src/$f" "$share/$f"
  done
}

install_crate coreos-installer 0.27.0 coreos-installer \
  LICENSE scripts/coreos-installer-service systemd/coreos-installer-generator fixtures/iso
