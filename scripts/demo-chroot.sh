#!/usr/bin/env bash
# Run ./scripts/demo.sh on "a machine where only Rust and the demo's needs
# are installed" and query it as README's quick start does. Root only;
# tests/demo_chroot.rs runs it and checks what it writes.
#
#   scripts/demo-chroot.sh --out DIR [--bin PATH]
#
# --bin PATH: copy this crc-appliance binary into the machine and let
# demo.sh run it (CRC_APPLIANCE_BIN) instead of its `cargo build --release`
# (measured: ~14 min on 2 busy cores when target/release is cold; a no-op
# when it is up to date, as the repository's target dir is shared).
#
# The machine: a Debian 12 root made with `debootstrap --variant=minbase
# bookworm` plus `gcc libc6-dev` (part of "Rust is installed": a rustup
# toolchain needs a C linker, and ring compiles C), cached in
# $CRC_DEMO_ROOT_CACHE (default /var/cache/crc-appliance-tests/bookworm-rust)
# and used through an overlay, so the cache stays pristine. The host's
# rustup toolchain and cargo home (~/.rustup, ~/.cargo: toolchain and
# registry cache) and this repository are bind-mounted at their own paths;
# cargo runs offline (CARGO_NET_OFFLINE) from that registry cache.
#
# Steps (every mount is made inside a private mount namespace and goes away
# with it):
#  1. prefetch: demo.sh runs in the host's network namespace with APT set to
#     download only, so the packages demo.sh itself asks for land in the
#     overlay's apt cache (the only step that uses the network: Debian's
#     mirror, as for debootstrap); it then stops at the missing xorriso.
#  2. demo: demo.sh runs unmodified in a private network namespace (loopback
#     only): installs from that cache (its apt-get update fails offline with
#     warnings only), builds or reuses target/release/crc-appliance (the
#     repository's target dir is shared with the host) and serves
#     configs/demo.yaml;
#  3. the README queries run in that namespace (dig/curl of the host on
#     loopback; `crc-appliance lb status` inside the chroot);
#  4. SIGINT (demo.sh's "Stop with Ctrl-C") and wait for a clean exit.
#
# Writes into DIR: dpkg-before.txt, dpkg-after.txt (installed packages),
# units-before.txt, units-after.txt (service units, init scripts),
# prefetch.log, demo.log, q-*.txt (one per query), build-seconds (demo.sh
# start to ready) and exit-status. Exit 0 when every step ran (the checks
# are the test's).
set -euo pipefail

if [ "${1:-}" = "--inside" ]; then
  # --inside ROOT_CACHE WORK REPO NETWORK CMD...: in a fresh mount namespace,
  # mount the overlay root and the bind mounts, then chroot and exec CMD.
  cache=$2 w=$3 repo=$4 network=$5
  shift 5
  mount -t overlay overlay -o "lowerdir=$cache,upperdir=$w/upper,workdir=$w/work" "$w/root"
  mount -t proc proc "$w/root/proc"
  mount --rbind /dev "$w/root/dev"
  for d in "$HOME/.rustup" "$HOME/.cargo" "$repo"; do
    mkdir -p "$w/root$d"
    mount --bind "$d" "$w/root$d"
  done
  if [ "$network" = host ]; then
    cp /etc/resolv.conf "$w/root/etc/resolv.conf"
  fi
  exec chroot "$w/root" /usr/bin/env -i HOME="$HOME" TERM=dumb LANG=C.UTF-8 \
    PATH="$HOME/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    CARGO_NET_OFFLINE=true "$@"
fi

out="" prebuilt=""
usage() { echo "usage: $0 --out DIR [--bin PATH]" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --bin) prebuilt=$2; shift 2 ;;
    *) usage ;;
  esac
done
[ -n "$out" ] || usage
[ -z "$prebuilt" ] || [ -x "$prebuilt" ] || { echo "demo-chroot: $prebuilt is not executable" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "demo-chroot: needs root (chroot, mounts, netns)" >&2; exit 2; }
for t in debootstrap unshare ip nsenter dig curl flock; do
  command -v "$t" >/dev/null || { echo "demo-chroot: $t not installed" >&2; exit 2; }
done
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
cache=${CRC_DEMO_ROOT_CACHE:-/var/cache/crc-appliance-tests/bookworm-rust}
# Debian's mirror as this machine's apt is configured (deb822 or one-line
# sources), else deb.debian.org.
host_mirror() {
  { awk '/^URIs:/ {print $2}' /etc/apt/sources.list.d/*.sources 2>/dev/null
    awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}' \
      /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null
  } | grep -v -e security -e '^$' | head -n 1
}
mirror=${CRC_DEMO_MIRROR:-$(host_mirror || true)}
mirror=${mirror:-http://deb.debian.org/debian}

# 0. The cached machine (built once; a lock keeps parallel runs out).
mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
flock 9
if [ ! -e "$cache/.crc-ready" ]; then
  echo "demo-chroot: building $cache (debootstrap minbase bookworm + gcc libc6-dev)" >&2
  rm -rf "$cache.tmp"
  debootstrap --variant=minbase bookworm "$cache.tmp" "$mirror" >"$out/debootstrap.log" 2>&1
  # No daemon may start from a package script inside the root.
  printf '#!/bin/sh\nexit 101\n' >"$cache.tmp/usr/sbin/policy-rc.d"
  chmod +x "$cache.tmp/usr/sbin/policy-rc.d"
  chroot "$cache.tmp" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    DEBIAN_FRONTEND=noninteractive sh -c \
    'apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc libc6-dev && apt-get clean' \
    >>"$out/debootstrap.log" 2>&1
  touch "$cache.tmp/.crc-ready"
  rm -rf "$cache"
  mv "$cache.tmp" "$cache"
fi
exec 9>&-

w=$(mktemp -d /var/tmp/crc-demo-chroot.XXXXXX)
mkdir -p "$w/upper" "$w/work" "$w/root"
ns="crcdemo$$"
pid=""
cleanup() {
  if [ -n "$pid" ]; then
    kill -KILL -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$w"
}
trap cleanup EXIT

inside() { # inside host CMD...: CMD in the machine, host network namespace
  shift
  unshare -m --propagation private "$self" --inside "$cache" "$w" "$repo" host "$@"
}

dpkg_list() {
  inside host dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" {print $2}' | sort
}

# Service units and init scripts: demo.sh must add none (no daemon).
units_list() {
  inside host find /etc/init.d /usr/lib/systemd/system /etc/systemd/system -mindepth 1 -maxdepth 2 2>/dev/null | sort || true
}

dpkg_list >"$out/dpkg-before.txt"
units_list >"$out/units-before.txt"

# 1. Prefetch what demo.sh installs (download only; it then fails at xorriso).
mkdir -p "$w/upper/etc/apt"
echo 'APT::Get::Download-Only "true";' >"$w/upper/etc/apt/demo-prefetch.conf"
set +e
inside host env APT_CONFIG=/etc/apt/demo-prefetch.conf bash -c "cd '$repo' && exec ./scripts/demo.sh" \
  >"$out/prefetch.log" 2>&1
set -e
rm -f "$w/upper/etc/apt/demo-prefetch.conf" "$w/upper/etc/resolv.conf"

# 2. The demo, in its own network namespace. Started directly (not through
# a shell function, which would fork): setsid, ip, unshare, this script,
# chroot, env, bash and demo.sh all exec, so $pid ends up being serve's, and
# the leader of a process group of its own (what cleanup kills).
bin=./target/release/crc-appliance
demo_env=()
if [ -n "$prebuilt" ]; then
  mkdir -p "$w/upper/opt/crc-appliance"
  cp "$prebuilt" "$w/upper/opt/crc-appliance/crc-appliance"
  # The libvirt driver runs in the helper next to the binary (demo.yaml
  # has libvirt.startOnServe).
  cp "$(dirname "$prebuilt")/crc-appliance-libvirt" "$w/upper/opt/crc-appliance/"
  bin=/opt/crc-appliance/crc-appliance
  demo_env=(CRC_APPLIANCE_BIN="$bin")
fi
ip netns add "$ns"
ip -n "$ns" link set lo up
start=$(date +%s)
setsid ip netns exec "$ns" unshare -m --propagation private "$self" --inside "$cache" "$w" "$repo" netns \
  env "${demo_env[@]}" bash -c "cd '$repo' && exec ./scripts/demo.sh" >"$out/demo.log" 2>&1 &
pid=$!
ready=""
# The release build may run here (up to 30 min on a slow machine).
for _ in $(seq 1 3600); do
  if grep -q "crc-appliance ready" "$out/demo.log"; then ready=1; break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.5
done
echo $(($(date +%s) - start)) >"$out/build-seconds"
if [ -z "$ready" ]; then
  echo "demo-chroot: the demo did not come up; see $out/demo.log" >&2
  tail -20 "$out/demo.log" >&2
  exit 1
fi

# 3. README's queries, on loopback inside the namespace.
q() { # q NAME CMD...
  local name=$1
  shift
  ip netns exec "$ns" "$@" >"$out/q-$name.txt" 2>&1 || echo "exit $?" >>"$out/q-$name.txt"
}
dig1() { q "$1" dig +time=3 +tries=2 @127.0.0.1 -p 15353 "${@:2}"; }
dig1 api api.demo.crc.testing
dig1 apps foo.apps.demo.crc.testing
dig1 ptr -x 127.0.10.10
dig1 srv _etcd-server-ssl._tcp.demo.crc.testing SRV
q ignition curl -sS -m 10 http://127.0.0.1:18080/ignition/master-0.ign
q status curl -sS -m 10 http://127.0.0.1:19180/status
q metrics curl -sS -m 10 http://127.0.0.1:19180/metrics
# The CLI inside the chroot, in serve's own mount and network namespace.
nsenter -t "$pid" -m -n -r -w /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  "$bin" lb --cluster configs/demo.yaml status \
  >"$out/q-lb-status.txt" 2>&1 || echo "exit $?" >>"$out/q-lb-status.txt"

# 4. Ctrl-C.
kill -INT "$pid"
status=timeout
for _ in $(seq 1 300); do
  if ! kill -0 "$pid" 2>/dev/null; then
    set +e
    wait "$pid"
    status=$?
    set -e
    break
  fi
  sleep 0.1
done
echo "$status" >"$out/exit-status"
pid=""
dpkg_list >"$out/dpkg-after.txt"
units_list >"$out/units-after.txt"
