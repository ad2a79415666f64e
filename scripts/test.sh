#!/usr/bin/env bash
# README command 2: set up .venv/ (with test tools) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# The HTML report test drives Debian's Chromium with Playwright (no browser download). Run as
# root with apt-get, this installs the system package chromium (the README says so);
# SELFREFINE_NO_APT=1 skips that, and the test is then skipped.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ "${SELFREFINE_NO_APT:-0}" != 1 ]; then
    echo "[test] installing the system package chromium with apt-get (as root) for the HTML report test; SELFREFINE_NO_APT=1 skips it" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "[test] chromium is missing: the HTML report test will be skipped (sudo apt-get install chromium)" >&2
  fi
fi
bash scripts/setup.sh test
# lint and format first: a finding fails the run in seconds, before the 15-minute suite
.venv/bin/ruff check src tests benchmarks scripts
.venv/bin/ruff format --check src tests benchmarks scripts
exec .venv/bin/python -m pytest "$@"
