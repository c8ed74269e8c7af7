#!/usr/bin/env bash
# Installs the Debian packages the project needs, only those missing.
#   ensure-system.sh build   what mysqlclient compiles against
#   ensure-system.sh test    that plus Chromium (browser tests) and docker-compose (config check)
set -euo pipefail
packages=(pkg-config default-libmysqlclient-dev build-essential)
if [ "${1:-build}" = test ]; then
  packages+=(chromium docker-compose)
fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "[setup] installing Debian packages: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
