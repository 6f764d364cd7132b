#!/usr/bin/env bash
# Joins the shards' aggregate JUnit reports into one.
# Usage: ci/merge.sh OUT.xml SHARD_DIR...
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
out="${1:?usage: ci/merge.sh OUT.xml SHARD_DIR...}"
shift
inputs=()
for d in "$@"; do
  if [ -f "$d/junit.xml" ]; then
    inputs+=("$d/junit.xml")
  else
    echo "merge: $d has no junit.xml (shard did not report)" >&2
    exit 1
  fi
done
harness junit merge "$out" "${inputs[@]}"
