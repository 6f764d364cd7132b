#!/usr/bin/env bash
# Makes /dev/kvm usable by the runner user where the host offers nested
# virtualisation, then says whether KVM or TCG will be used.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
if [ -e /dev/kvm ] && [ "$(id -u)" != 0 ]; then
  echo 'KERNEL=="kvm", GROUP="kvm", MODE="0666", OPTIONS+="static_node=kvm"' |
    sudo tee /etc/udev/rules.d/99-kvm4all.rules >/dev/null
  sudo udevadm control --reload-rules
  sudo udevadm trigger --name-match=kvm
fi
harness host
