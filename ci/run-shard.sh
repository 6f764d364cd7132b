#!/usr/bin/env bash
# Runs one shard of the matrix into OUT (JUnit, JSON results, console
# logs). The exit
# status is the matrix's: non-zero on any unexpected result.
# Usage: ci/run-shard.sh I/N OUT
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
shard="${1:?usage: ci/run-shard.sh I/N OUT}"
out="${2:?usage: ci/run-shard.sh I/N OUT}"
mkdir -p "$out"
harness matrix --matrix "$MATRIX" --shard "$shard" --out "$out" --json "$out/results.json"
