#!/usr/bin/env bash
# Installs what only the tests need, not the harness's users: headless
# Chromium for the HTML report's browser test (harness/tests/report_html.rs)
# and the sqlite3 shell that checks a killed run's history
# (harness/tests/compare.rs). `cargo xtask ci` runs it after
# `harness setup --yes`.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
missing=()
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  missing+=(chromium)
fi
command -v sqlite3 >/dev/null || missing+=(sqlite3)
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-test-deps: installing ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
