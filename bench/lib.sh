# bench/lib.sh - sourced by bench/<area>.sh. Finds the shared peer harness
# (<repo>/../shared/bench, or $SHARED_BENCH) and the release binary (built if
# missing), then execs the harness with the given peers plus crc-appliance as
# the custom target "crc" (bench/targets/<area>.sh with the harness's
# placeholders). Results go to $RESULTS_DIR (default <repo>/bench/results,
# which git ignores; the shared folder is read-only).
#
# A run in which crc-appliance's rate rows (unit `…/s`) are missing or 0
# fails (exit 1) with the rows named: a figure of 0 is a broken setup (a
# refused relay, a target that did not start), never a result to file.
#
# run_area AREA "TARGET PLACEHOLDERS" "DEFAULT PEERS" [PEERS FROM THE COMMAND LINE...]
run_area() {
  local area=$1 placeholders=$2 defaults=$3
  shift 3
  local repo shared
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  shared=${SHARED_BENCH:-$repo/../shared/bench}
  [[ -x "$shared/$area.sh" ]] || { echo "shared harness not found at $shared (set SHARED_BENCH)" >&2; exit 1; }
  [[ -x "$repo/target/release/crc-appliance" ]] || (cd "$repo" && cargo build --release --bin crc-appliance)
  export RESULTS_DIR=${RESULTS_DIR:-$repo/bench/results}
  local peers=("$@")
  [[ ${#peers[@]} -gt 0 ]] || read -r -a peers <<<"$defaults"
  local rc=0
  "$shared/$area.sh" "${peers[@]}" "crc=$repo/bench/targets/$area.sh $placeholders" || rc=$?
  [[ $rc -eq 0 ]] || exit "$rc"
  check_rates "$RESULTS_DIR/$area-latest.tsv" crc
}

# check_rates TSV TARGET: fail when TARGET has no rate row (unit ending in
# /s) in TSV, or when any of them is 0, empty or nan.
check_rates() {
  local tsv=$1 target=$2
  [[ -f $tsv ]] || { echo "bench: no results at $tsv" >&2; exit 1; }
  awk -F'\t' -v t="$target" '
    NR > 1 && $2 == t && $7 ~ /\/s$/ {
      n++
      if ($6 == "" || $6 == "nan" || $6 + 0 == 0) { bad++; print "bench: " t " " $3 " " $4 " = " $6 " " $7 " (rep " $5 ")" > "/dev/stderr" }
    }
    END {
      if (n == 0) { print "bench: no rate figure for " t " in " FILENAME > "/dev/stderr"; exit 1 }
      if (bad) { print "bench: FAILED: " bad " rate figure(s) of " t " are 0: its setup is broken (see the target log), not its speed" > "/dev/stderr"; exit 1 }
    }' "$tsv"
}
