#!/usr/bin/env bash
# System packages the test suite needs, installed from Debian when absent: prometheus + promtool (2.42 on
# bookworm; the real-Prometheus tests), amtool (prometheus-alertmanager) and docker-compose 1.29 (compose
# validation). Idempotent; uses sudo when not root. Services the packages may start are stopped: the tests
# start their own Prometheus on a free loopback port.
set -euo pipefail

need=()
{ command -v prometheus && command -v promtool; } >/dev/null || need+=(prometheus)
command -v amtool >/dev/null || need+=(prometheus-alertmanager)
command -v docker-compose >/dev/null || need+=(docker-compose)
[ ${#need[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  $sudo systemctl stop prometheus prometheus-alertmanager 2>/dev/null || true
fi
prometheus --version | head -n 1
