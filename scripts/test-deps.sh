#!/usr/bin/env bash
# System packages the test suite needs: Prometheus 2.42 + promtool (real-Prometheus tests), Alertmanager's
# amtool, and docker-compose 1.29 (compose validation). Installed from Debian's packages when missing.
set -euo pipefail
need=()
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v amtool >/dev/null 2>&1 || need+=(prometheus-alertmanager)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
