#!/usr/bin/env bash
# Build every test binary of the workspace once, then run them TEST_JOBS at
# a time (default 3) instead of one after another: most of the long tests
# wait (on a guest booting, a lease, a timer), they do not compute.
#
# - Each binary runs as `cargo test` would run it (working directory: its
#   package's root; CARGO and CARGO_MANIFEST_DIR set) with
#   `--test-threads=$TEST_THREADS` (default 4), bounded by
#   TEST_BINARY_TIMEOUT seconds (default 1800; then SIGTERM, SIGKILL 30 s
#   later, and the binary counts as failed).
# - Its output (stdout and stderr) is kept whole and printed when it ends.
# - Binaries that would fight over one host resource never run at the same
#   time (see `groups_of`): the qemu/TCG guests (CPU: two at once on a small
#   host make both slow enough to hit their boot timeouts), the libvirtd
#   the libvirt tests start and stop, loop devices, and the hostile-host
#   floods (each counts what got through in a fixed time: two at once on a
#   small host starve each other's clients).
# - The longest binaries start first: their last times are kept in
#   target/test-times.tsv (a first run uses the seed times below).
# - At the end: one line per binary (status, seconds, tests), the sum of the
#   binaries' times and the wall time; exit 1 if any binary failed, crashed
#   or timed out. The tests each binary ran are kept in
#   target/test-counts.tsv (`label<TAB>passed<TAB>failed`, for
#   scripts/harness-count.sh).
# TEST_ONLY=REGEX runs only the binaries whose label (`test:dhcp`,
# `lib:crc_appliance`, `bin:crc-appliance`) matches (grep -E).
# The skipped-test log (CRC_SKIP_LOG) is inherited from the caller
# (scripts/test.sh), which runs the skip gate afterwards.
# Usage: run-tests.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=${TEST_JOBS:-3}
threads=${TEST_THREADS:-4}
limit=${TEST_BINARY_TIMEOUT:-1800}
times_file=${CARGO_TARGET_DIR:-$root/target}/test-times.tsv
counts_file=${CARGO_TARGET_DIR:-$root/target}/test-counts.tsv
work=$(mktemp -d)
: >"$work/counts.tsv"
declare -A running=() # pid -> binary index
cleanup() {
  local pid
  for pid in "${!running[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Exclusive groups: no two binaries of one group run at once. `heavy`: the
# qemu/TCG guests and the hostile-host floods, which each keep a core busy
# for the whole binary and measure what got done in fixed time, so one runs
# at a time (beside lighter binaries).
groups_of() {
  case $1 in
    test:bmc) echo heavy libvirtd ;;
    test:libvirt_kvm) echo heavy libvirtd ;;
    test:coreos_install) echo heavy loopdev ;;
    test:netboot_qemu | test:netboot_proxy_qemu | test:sno_boot | test:iso_boot | test:demo_chroot) echo heavy ;;
    test:registry_durable) echo loopdev ;;
    test:ha_hostile | test:http_slowread | test:admin_hostile | test:http_pressure) echo heavy ;;
  esac
}

# Seconds a binary took last time (the seed: the suite of 2026-11-28).
seed_seconds() {
  case $1 in
    test:bmc) echo 83 ;; test:netboot_qemu) echo 66 ;; test:libvirt_kvm) echo 48 ;;
    test:ha_hostile) echo 47 ;; test:netboot_proxy_qemu) echo 43 ;; test:ntp) echo 42 ;;
    test:registry_pullthrough) echo 41 ;; test:ha_pair) echo 38 ;; test:packaging) echo 32 ;;
    test:http_slowread) echo 32 ;; test:sno_boot) echo 30 ;; test:admin_hostile) echo 25 ;;
    test:bmc_vendors) echo 23 ;; test:registry_ha) echo 21 ;; test:firewalld) echo 20 ;;
    *) echo 5 ;;
  esac
}

echo "run-tests: building the test binaries" >&2
cargo test --workspace --all-targets --no-run --message-format=json-render-diagnostics >"$work/build.json"
labels=() exes=() dirs=()
while IFS=$'\t' read -r label exe dir; do
  if [ -n "${TEST_ONLY:-}" ] && ! grep -qE "$TEST_ONLY" <<<"$label"; then continue; fi
  labels+=("$label") exes+=("$exe") dirs+=("$dir")
done < <(jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
  | [(.target.kind[0] + ":" + .target.name), .executable, (.manifest_path | sub("/Cargo.toml$"; ""))]
  | @tsv' "$work/build.json")
[ "${#labels[@]}" -gt 0 ] || { echo "run-tests: no test binary built" >&2; exit 1; }

declare -A last=()
if [ -s "$times_file" ]; then
  while IFS=$'\t' read -r label secs; do last[$label]=$secs; done <"$times_file"
fi
# Pending binaries, longest first.
mapfile -t pending < <(for i in "${!labels[@]}"; do
  l=${labels[i]}
  echo "${last[$l]:-$(seed_seconds "$l")} $i"
done | sort -k1,1nr -k2,2n | awk '{print $2}')

declare -A busy=() started=()
statuses=() seconds=() counts=()
fits() {
  local g
  for g in $(groups_of "${labels[$1]}"); do [ -z "${busy[$g]:-}" ] || return 1; done
}
start() {
  local i=$1 g
  for g in $(groups_of "${labels[i]}"); do busy[$g]=1; done
  (cd "${dirs[i]}" && exec env CARGO="$(command -v cargo)" CARGO_MANIFEST_DIR="${dirs[i]}" \
    timeout -k 30 "$limit" "${exes[i]}" --test-threads="$threads") >"$work/$i.log" 2>&1 &
  running[$!]=$i
  started[$i]=$EPOCHREALTIME
}
# finish INDEX EXIT_CODE: record and print the binary's whole output.
finish() {
  local i=$1 rc=$2 g secs status passed failed
  for g in $(groups_of "${labels[i]}"); do unset "busy[$g]"; done
  secs=$(awk -v a="${started[$i]}" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  passed=$(awk '/^test result:/ { p += $4 } END { print p + 0 }' "$work/$i.log")
  failed=$(awk '/^test result:/ { f += $6 } END { print f + 0 }' "$work/$i.log")
  case $rc in
    0) status=ok ;;
    101) status=FAILED ;;
    124 | 137) status="TIMED OUT (${limit}s)" ;;
    *) status="CRASHED (exit $rc)" ;;
  esac
  statuses[i]=$status seconds[i]=$secs counts[i]="$passed passed, $failed failed"
  printf '%s\t%s\t%s\n' "${labels[i]}" "$passed" "$failed" >>"$work/counts.tsv"
  echo
  echo "==== ${labels[i]} (${exes[i]#"$root"/}): $status in ${secs}s"
  cat "$work/$i.log"
}

wall_start=$EPOCHREALTIME
while [ "${#pending[@]}" -gt 0 ] || [ "${#running[@]}" -gt 0 ]; do
  while [ "${#running[@]}" -lt "$jobs" ]; do
    pick=-1
    for k in "${!pending[@]}"; do
      if fits "${pending[k]}"; then pick=$k; break; fi
    done
    [ "$pick" -ge 0 ] || break
    start "${pending[pick]}"
    unset "pending[pick]"
    pending=("${pending[@]}")
  done
  rc=0
  wait -n -p done_pid "${!running[@]}" || rc=$?
  i=${running[$done_pid]}
  unset "running[$done_pid]"
  finish "$i" "$rc"
done
wall=$(awk -v a="$wall_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')

echo
echo "==== test binaries: ${#labels[@]}, $jobs at a time"
bad=0
sum=0
: >"$work/times.tsv"
for i in $(for i in "${!labels[@]}"; do echo "${seconds[i]} $i"; done | sort -k1,1nr | awk '{print $2}'); do
  printf '%-8s %7ss  %-32s %s\n' "${statuses[i]%% *}" "${seconds[i]}" "${labels[i]}" "${counts[i]}"
  [ "${statuses[i]}" = ok ] || bad=$((bad + 1))
  sum=$(awk -v a="$sum" -v b="${seconds[i]}" 'BEGIN { print a + b }')
  printf '%s\t%.0f\n' "${labels[i]}" "${seconds[i]}" >>"$work/times.tsv"
done
# Keep the times of the binaries not run this time (TEST_ONLY).
for l in "${!last[@]}"; do
  grep -q "^$l"$'\t' "$work/times.tsv" || printf '%s\t%s\n' "$l" "${last[$l]}" >>"$work/times.tsv"
done
mkdir -p "$(dirname "$times_file")"
cp "$work/times.tsv" "$times_file"
cp "$work/counts.tsv" "$counts_file"
echo "==== sum of the binaries' times ${sum}s; wall time ${wall}s"
if [ "$bad" -gt 0 ]; then
  echo "==== $bad test binary(ies) failed:" >&2
  for i in "${!labels[@]}"; do
    [ "${statuses[i]}" = ok ] || echo "  ${labels[i]}: ${statuses[i]}" >&2
  done
  exit 1
fi
