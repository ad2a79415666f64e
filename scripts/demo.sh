#!/usr/bin/env bash
# README command 1: set up .venv/ and watch the embedded model draft, critique and refine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# our best mode (--preset best): four sampled drafts chosen by the concepts counted in code
# (the task's judge breaks ties: the model's P(Yes) to "does it make sense?"), one round of
# four sampled refinements on the critique plus the code's findings, a refinement kept only
# if it scores higher
exec .venv/bin/selfrefine run commongen "kitchen, knife, onion, cut, cry" --preset best "$@"
