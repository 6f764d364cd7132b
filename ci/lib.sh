#!/usr/bin/env bash
# Shared by the ci/ scripts: strict mode, the project root, and a release
# build of the harness (built once, reused by every step).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ROOT
MATRIX="${MATRIX:-$ROOT/matrix.yaml}"
export MATRIX

# HARNESS_BIN: an already built harness (tests pass their own build).
harness() {
  local bin="${HARNESS_BIN:-$ROOT/target/release/harness}"
  if [ -z "${HARNESS_BIN:-}" ] && { [ ! -x "$bin" ] || [ -n "${HARNESS_REBUILD:-}" ]; }; then
    (cd "$ROOT" && cargo build --quiet --release -p harness)
  fi
  "$bin" "$@"
}

# Writes key=value to the GitHub step output when running in Actions.
gh_output() {
  if [ -n "${GITHUB_OUTPUT:-}" ]; then
    printf '%s=%s\n' "$1" "$2" >>"$GITHUB_OUTPUT"
  fi
}
