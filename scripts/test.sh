#!/usr/bin/env bash
# README command 2: set up .venv/ (with test tools) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
exec .venv/bin/python -m pytest "$@"
