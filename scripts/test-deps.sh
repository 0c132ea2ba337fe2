#!/usr/bin/env bash
# System packages the test suite needs, installed from Debian when absent: prometheus + promtool (2.42 on
# bookworm; the real-Prometheus tests), amtool (prometheus-alertmanager) and docker-compose 1.29 (compose
# validation), chromium (the HTML report opened in a real browser). Idempotent; uses sudo when not root.
# Services the packages may start are stopped: the tests start their own Prometheus on a free loopback port.
set -euo pipefail

need=()
{ command -v prometheus && command -v promtool; } >/dev/null || need+=(prometheus)
command -v amtool >/dev/null || need+=(prometheus-alertmanager)
command -v docker-compose >/dev/null || need+=(docker-compose)
# the HTML report is opened in a real headless browser (tests/test_report_html.py)
{ command -v chromium || [ -x /usr/bin/chromium ]; } >/dev/null || need+=(chromium)
# the real-engine tier builds llama-server from source (scripts/build-llama-server.sh)
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v c++ >/dev/null || need+=(g++)
if [ ${#need[@]} -gt 0 ]; then
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  $sudo systemctl stop prometheus prometheus-alertmanager 2>/dev/null || true
fi
fi
prometheus --version | head -n 1
# llama-server for the real-engine tier (tests/test_llamacpp*.py): built once per version, cached outside the repo
bash "$(dirname "$0")/build-llama-server.sh"
