#!/usr/bin/env bash
# Joins the shards' JSON results into one file, draws the HTML report of
# the run, and writes the job summary (`harness report markdown`: the
# counts, the grid and the failures; and what changed since the base
# branch's last run when BASE names its results file).
# Usage: ci/report.sh OUT_DIR SHARD_DIR...
# Env: BASE (optional): the base branch's results.json.
#      GITHUB_STEP_SUMMARY (Actions): where the markdown goes.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
out="${1:?usage: ci/report.sh OUT_DIR SHARD_DIR...}"
shift
mkdir -p "$out"
inputs=()
for d in "$@"; do
  if [ -f "$d/results.json" ]; then
    inputs+=("$d/results.json")
  else
    echo "report: $d has no results.json (shard did not report)" >&2
    exit 1
  fi
done
# One document: the first shard's run, every shard's cells in order.
python3 - "$out/results.json" "${inputs[@]}" <<'EOF'
import json, os, sys
out, *files = sys.argv[1:]
docs = [json.load(open(f)) for f in files]
merged = dict(docs[0])
merged["cells"] = [c for d in docs for c in d.get("cells", [])]
with open(out + ".tmp", "w") as f:
    json.dump(merged, f, indent=2)
os.replace(out + ".tmp", out)
EOF
harness report html "$out/results.json" -o "$out/report.html"
summary="${GITHUB_STEP_SUMMARY:-$out/summary.md}"
{
  # The counts, the grid and the cells not passed, from the typed results.
  harness report markdown "$out/results.json"
  echo
  if [ -n "${BASE:-}" ] && [ -f "$BASE" ]; then
    echo "### Against the base branch's last run"
    echo
    echo '```'
    # Exit 1 is "regressed": said in the text, the job's verdict is the
    # matrix's own.
    harness compare "$BASE" "$out/results.json" 2>&1 || true
    echo '```'
  else
    echo "No earlier run of the base branch to compare with."
  fi
  echo
  echo "The HTML report is the \`report\` artifact of this run."
} >>"$summary"
