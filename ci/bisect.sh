#!/usr/bin/env bash
# Bisects a kernel tree with the harness and writes the result to the job
# summary. Inputs (env): TREE GOOD BAD TEST KERNEL TOPOLOGY; optional
# REPEAT (runs per step), METRIC and THRESHOLD (performance bisect).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
: "${TREE:?}" "${GOOD:?}" "${BAD:?}" "${TEST:?}" "${KERNEL:?}" "${TOPOLOGY:?}"
work="$ROOT/out/bisect"
mkdir -p "$work"
if [ ! -d "$work/tree/.git" ]; then
  git clone --quiet "$TREE" "$work/tree"
fi
extra=(--repeat "${REPEAT:-1}")
if [ -n "${METRIC:-}" ]; then
  : "${THRESHOLD:?METRIC needs THRESHOLD, e.g. '<0.8'}"
  extra+=(--metric "$METRIC" --threshold "$THRESHOLD")
fi
status=0
harness bisect --tree "$work/tree" --good "$GOOD" --bad "$BAD" \
  --kernel "$KERNEL" --topology "$TOPOLOGY" --test "$TEST" \
  "${extra[@]}" --out "$work" | tee "$work/result.txt" || status=$?
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  {
    echo "## bisect: $GOOD..$BAD ($TEST)"
    echo '```'
    cat "$work/result.txt"
    echo '```'
  } >>"$GITHUB_STEP_SUMMARY"
fi
exit "$status"
