#!/usr/bin/env bash
# Installs what only the tests need, not the harness's users: headless
# Chromium for the HTML report's browser test (harness/tests/report_html.rs).
# `cargo xtask ci` runs it after `harness setup --yes`.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  echo "install-test-deps: installing chromium"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
