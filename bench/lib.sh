# bench/lib.sh - sourced by bench/<area>.sh. Finds the shared peer harness
# (<repo>/../shared/bench, or $SHARED_BENCH) and the release binary (built if
# missing), then execs the harness with the given peers plus crc-appliance as
# the custom target "crc" (bench/targets/<area>.sh with the harness's
# placeholders). Results go to $RESULTS_DIR (default <repo>/bench/results,
# which git ignores; the shared folder is read-only).
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
  exec "$shared/$area.sh" "${peers[@]}" "crc=$repo/bench/targets/$area.sh $placeholders"
}
