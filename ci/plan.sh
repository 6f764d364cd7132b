#!/usr/bin/env bash
# Plans the sharded run: prints the --list --json document and emits
# `shards=["1/N", ...]` (non-empty shards only) for the job matrix.
# Usage: ci/plan.sh [SHARDS]   (default 4; MATRIX selects the matrix file)
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
n="${1:-${SHARDS:-4}}"
plan_json="$(harness matrix --matrix "$MATRIX" --list --json --shard "1/$n")"
shards="$(printf '%s' "$plan_json" | python3 -c '
import json, sys
plan = json.load(sys.stdin)
print(json.dumps([s["shard"] for s in plan["shards"] if s["cells"]]))
')"
printf '%s\n' "$plan_json"
echo "plan: shards $shards" >&2
gh_output shards "$shards"
