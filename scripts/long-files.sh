#!/bin/sh
# Lists the production files under src/ over 640 lines (issue #39): a file's
# production part is the file without its inline `#[cfg(test)] mod tests {`
# module; tests.rs and *_tests.rs files are left out. tests/file_size.rs
# checks the same rule (with the list of files still being split).
# Usage: scripts/long-files.sh [limit]
set -eu
limit=${1:-640}
cd "$(dirname "$0")/../src"
find . -name '*.rs' ! -name 'tests.rs' ! -name '*_tests.rs' | sort | while read -r f; do
    n=$(awk 'prev == "#[cfg(test)]" && $0 == "mod tests {" { print NR - 2; found = 1; exit }
             { prev = $0 }
             END { if (!found) print NR }' "$f")
    if [ "$n" -gt "$limit" ]; then
        printf '%5d %s\n' "$n" "${f#./}"
    fi
done
