#!/usr/bin/env bash
# Make sure fio, ioping and shellcheck (user-data checks) are on PATH. Installs them with apt-get when we are
# root; otherwise prints the exact command to run and fails.
set -euo pipefail
missing=()
for tool in fio ioping shellcheck; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "iofleet needs ${missing[*]} and this user cannot install packages." >&2
  echo "Run:  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "iofleet needs ${missing[*]}; install them with your package manager." >&2
  exit 1
fi
echo "installing ${missing[*]} with apt-get ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 || {
  apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null
}
for tool in "${missing[@]}"; do command -v "$tool" >/dev/null || { echo "failed to install $tool" >&2; exit 1; }; done
