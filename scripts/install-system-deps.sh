#!/usr/bin/env bash
# Debian packages the test suite needs: Chromium for the browser tests, wrk for
# the load benchmarks, curl for the docs' curl commands (tests/docs). Idempotent; needs root (CI runs as root).
set -euo pipefail
needed=()
command -v chromium >/dev/null 2>&1 || needed+=(chromium)
command -v wrk >/dev/null 2>&1 || needed+=(wrk)
command -v curl >/dev/null 2>&1 || needed+=(curl)
if [ ${#needed[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-system-deps: need root to install: ${needed[*]} (try: sudo $0)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${needed[@]}" >/dev/null
echo "install-system-deps: installed ${needed[*]}"
