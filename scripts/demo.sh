#!/usr/bin/env bash
# README command 1: set up .venv/ and watch the embedded model draft, critique and refine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# our best mode: the critique plus concepts counted by code, and the best-verified draft returned
exec .venv/bin/selfrefine run commongen "kitchen, knife, onion, cut, cry" --max-iters 2 \
  --verifier-mode hybrid --select verified "$@"
