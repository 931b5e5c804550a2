#!/usr/bin/env bash
# Install the Debian packages in scripts/packages.txt that are missing.
# Runs a second pass because installing one package can remove another
# (e.g. qemu-system-x86 replaces a backported qemu-utils).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mapfile -t pkgs < <(grep -v '^\s*#' "$here/packages.txt" | awk 'NF && $2 != "extract" {print $1}')
# "NAME extract": a package whose installation would start (and enable) a
# system daemon on this host: downloaded and unpacked with dpkg-deb -x into
# $extract_dir/NAME instead, for the tests that run it privately.
mapfile -t extract_pkgs < <(grep -v '^\s*#' "$here/packages.txt" | awk '$2 == "extract" {print $1}')
extract_dir=/var/cache/crc-appliance-tests/extract
missing_pkgs() {
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# `prometheus` is installed for promtool only: keep its service from starting
# (invoke-rc.d asks policy-rc.d; 101 = action forbidden) when no policy exists.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\ncase "$1" in prometheus) exit 101;; esac\nexit 0\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod +x "$policy"
  trap '$sudo rm -f "$policy"' EXIT
fi
updated=""
for pass in 1 2; do
  mapfile -t missing < <(missing_pkgs)
  ((${#missing[@]})) || break
  echo "installing (pass $pass): ${missing[*]}" >&2
  if [ -z "$updated" ]; then
    $sudo apt-get update -qq
    updated=1
  fi
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
done
if command -v systemctl >/dev/null && systemctl is-enabled prometheus >/dev/null 2>&1; then
  $sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
mapfile -t missing < <(missing_pkgs)
if ((${#missing[@]})); then
  echo "could not install: ${missing[*]}" >&2
  exit 1
fi
candidate() { apt-cache policy "$1" | awk '/Candidate:/ {print $2}'; }
for p in "${extract_pkgs[@]}"; do
  version=$(candidate "$p")
  if { [ -z "$version" ] || [ "$version" = "(none)" ]; } && [ -z "$updated" ]; then
    $sudo apt-get update -qq
    updated=1
    version=$(candidate "$p")
  fi
  [ -n "$version" ] && [ "$version" != "(none)" ] || { echo "no candidate for $p" >&2; exit 1; }
  if [ "$(cat "$extract_dir/$p/.version" 2>/dev/null)" = "$version" ]; then
    continue
  fi
  echo "extracting (not installing) $p $version into $extract_dir/$p" >&2
  tmp=$($sudo mktemp -d)
  (cd "$tmp" && $sudo chmod 777 . && apt-get download -qq "$p=$version")
  $sudo rm -rf "$extract_dir/$p"
  $sudo mkdir -p "$extract_dir/$p"
  $sudo dpkg-deb -x "$tmp"/*.deb "$extract_dir/$p"
  echo "$version" | $sudo tee "$extract_dir/$p/.version" >/dev/null
  $sudo rm -rf "$tmp"
done
if ! command -v cargo >/dev/null; then
  echo "cargo is not installed: install Rust (rustup) first" >&2
  exit 1
fi
