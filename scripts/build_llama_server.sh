#!/usr/bin/env bash
# Build llama.cpp's own `llama-server` (continuous batching, -np slots, prompt cache) from
# the llama.cpp sources vendored in the llama-cpp-python sdist, so the benchmark server runs
# exactly the engine the embedded backend runs. Benchmarks only; no test needs it.
#
#   bash scripts/build_llama_server.sh          # prints the binary's path when done
#
# About 10-11 minutes on 2 cores, once: the binary is cached in
# ~/.cache/selfrefine/llama-server/<key>/ (key = version + flags + arch).
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_VERSION=${LLAMA_VERSION:-0.3.36}
# Portable CPU flags: a -march=native build crashed here in the first decode.
FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DBUILD_SHARED_LIBS=OFF -DCMAKE_BUILD_TYPE=Release"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && PY=.venv/bin/python

log() { printf '\033[1m[llama-server]\033[0m %s\n' "$*" >&2; }

KEY=$(printf '%s|%s|%s' "$LLAMA_VERSION" "$FLAGS" "$(uname -m)" | sha256sum | cut -c1-16)
OUT="${XDG_CACHE_HOME:-$HOME/.cache}/selfrefine/llama-server/$KEY"
if [ -x "$OUT/llama-server" ] && "$OUT/llama-server" --version >/dev/null 2>&1; then
  echo "$OUT/llama-server"
  exit 0
fi

for tool in cmake make gcc g++; do
  command -v "$tool" >/dev/null || { log "$tool is required to build llama-server"; exit 1; }
done

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
log "downloading the llama-cpp-python $LLAMA_VERSION sdist"
"$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
  "llama-cpp-python==$LLAMA_VERSION" -d "$WORK" 2>/dev/null
tar xzf "$WORK"/llama_cpp_python-*.tar.gz -C "$WORK"
SRC=$(echo "$WORK"/llama_cpp_python-*/vendor/llama.cpp)
[ -f "$SRC/CMakeLists.txt" ] || { log "no vendored llama.cpp in the sdist"; exit 1; }

log "building llama-server (about 10-11 minutes on 2 cores)"
# shellcheck disable=SC2086
cmake -S "$SRC" -B "$WORK/build" $FLAGS >"$WORK/cmake.log" 2>&1 \
  || { tail -30 "$WORK/cmake.log" >&2; exit 1; }
cmake --build "$WORK/build" --target llama-server -j "$(nproc)" >"$WORK/build.log" 2>&1 \
  || { tail -30 "$WORK/build.log" >&2; exit 1; }

mkdir -p "$OUT"
cp "$WORK/build/bin/llama-server" "$OUT/llama-server"
"$OUT/llama-server" --version >/dev/null 2>&1 || { log "the built llama-server does not run"; exit 1; }
log "built $OUT/llama-server"
echo "$OUT/llama-server"
