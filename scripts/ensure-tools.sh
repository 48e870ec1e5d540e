#!/usr/bin/env bash
# Make sure the given tools are on PATH. Each argument is COMMAND or
# COMMAND:DEBIAN_PACKAGE. Installs what is missing with apt-get when we are
# root; otherwise prints the exact command to run and fails.
#   scripts/ensure-tools.sh fio ioping mkfs.xfs:xfsprogs
set -euo pipefail
[ $# -gt 0 ] || set -- fio ioping
missing=()
packages=()
for spec in "$@"; do
  tool=${spec%%:*}
  package=${spec#*:}
  if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ] && [ ! -x "/sbin/$tool" ]; then
    missing+=("$tool")
    packages+=("$package")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "iofleet needs ${missing[*]} and this user cannot install packages." >&2
  echo "Run:  sudo apt-get install -y ${packages[*]}" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "iofleet needs ${missing[*]}; install ${packages[*]} with your package manager." >&2
  exit 1
fi
echo "installing ${packages[*]} with apt-get ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends "${packages[@]}" >/dev/null 2>&1 || {
  apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${packages[@]}" >/dev/null
}
for tool in "${missing[@]}"; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || [ -x "/sbin/$tool" ] || {
    echo "failed to install $tool" >&2
    exit 1
  }
done
