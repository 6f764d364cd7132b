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
# arm64 guests (the matrix's *-arm64 kernels): QEMU's aarch64 emulator and
# the cross linker and libc the build embeds arm64 guest binaries with.
pkgs+=(qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
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
# The aarch64 Rust std: rustup's target where rustup can fetch it.
if command -v rustup >/dev/null; then
  rustup target list --installed | grep -qx aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu
fi
qemu-system-aarch64 --version | head -1
