#!/usr/bin/env bash
# Debian's Chromium, for the browser test of `jointer report` and scripts/report_screenshots.py.
# Idempotent: nothing to do when /usr/bin/chromium exists (Playwright's own browser download is
# not used; the tests drive this binary).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium
