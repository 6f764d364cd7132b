#!/usr/bin/env bash
# Installs what the harness needs on a Debian or Ubuntu runner: QEMU, the
# Debian archive keyring and gpgv (to verify kernel downloads), static
# glibc (guest binaries), and the kernel build dependencies.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
pkgs=(qemu-system-x86 gpgv libc6-dev gcc make bc bison flex libelf-dev libssl-dev cpio xz-utils)
# Ubuntu does not ship Debian's keyring under this name by default.
pkgs+=(debian-archive-keyring)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
qemu-system-x86_64 --version | head -1
