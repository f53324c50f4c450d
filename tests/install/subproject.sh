#!/usr/bin/env bash
# Builds tests/install/consumer_sub, which adds cinder's source tree as a subproject, and runs its
# program (consumer_c/main.c with the consumer's own extension op).
# Usage: subproject.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1
work=$2
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$work"
if ! cmake -S "$here/consumer_sub" -B "$work" -DCINDER_SOURCE_DIR="$src" > "$work.log" 2>&1; then
  cat "$work.log"
  echo "subproject test: FAILED: configuring a project with cinder as a subproject" >&2
  exit 1
fi
if ! cmake --build "$work" -j2 --target consumer_sub >> "$work.log" 2>&1; then
  tail -50 "$work.log"
  echo "subproject test: FAILED: building it" >&2
  exit 1
fi
"$work/consumer_sub"
echo "subproject test: passed"
