#!/usr/bin/env bash
# What the test suite needs beyond Python, installed when absent, each said (with why) before it is installed:
#   Debian packages (apt-get, as root: through sudo when not root): prometheus + promtool (2.42 on bookworm; the
#   real-Prometheus tests), amtool (prometheus-alertmanager) and docker-compose 1.29 (compose validation),
#   chromium (the HTML report opened in a real browser), cmake, ninja-build and g++ (to build llama-server);
#   then llama.cpp's llama-server, built from source once (scripts/build-llama-server.sh: 10-17 minutes on 2
#   cores, a progress line every 20 s) and cached outside the repo.
# Idempotent: a second run installs nothing and finds llama-server cached. Services the packages may start are
# stopped: the tests start their own Prometheus on a free loopback port.
#   --dry-run   say what would be installed and stop
set -euo pipefail

dry_run=false
[ "${1:-}" = "--dry-run" ] && dry_run=true

need=() why=()
want() { need+=("$1"); why+=("$1: $2"); }
{ command -v prometheus && command -v promtool; } >/dev/null || want prometheus "Prometheus and promtool, for the rule and end-to-end tests"
command -v amtool >/dev/null || want prometheus-alertmanager "amtool, to check the Alertmanager config"
command -v docker-compose >/dev/null || want docker-compose "to validate docker-compose.yml"
{ command -v chromium || [ -x /usr/bin/chromium ]; } >/dev/null || want chromium "to open the HTML report in a real headless browser"
command -v cmake >/dev/null || want cmake "to build llama-server (the engine tier)"
command -v ninja >/dev/null || want ninja-build "to build llama-server (the engine tier)"
command -v c++ >/dev/null || want g++ "to build llama-server (the engine tier)"

if [ ${#need[@]} -eq 0 ]; then
  echo "test-deps: the Debian packages are installed already"
else
  sudo=""
  as="as root"
  [ "$EUID" -eq 0 ] || { sudo=sudo; as="through sudo"; }
  echo "test-deps: installing ${#need[@]} Debian package(s) with apt-get, $as:"
  printf '  %s\n' "${why[@]}"
  if ! $dry_run; then
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
    if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
      $sudo systemctl stop prometheus prometheus-alertmanager 2>/dev/null || true
    fi
  fi
fi
echo "test-deps: then llama-server for the engine tier (tests/test_llamacpp*.py): built once, 10-17 minutes" \
     "on 2 cores, unless cached"
$dry_run && exit 0
prometheus --version | head -n 1
bash "$(dirname "$0")/build-llama-server.sh"
