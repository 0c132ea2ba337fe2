#!/usr/bin/env bash
# Builds llama.cpp's llama-server (CPU only) from the llama.cpp vendored in the llama-cpp-python source
# distribution on PyPI, for the real-engine test tier (tests/test_llamacpp*.py). The result goes to a
# per-version folder outside the repo, so a rerun on the same machine skips the build:
#   ${LOADGEN_CACHE:-$HOME/.cache/loadgen}/llama-server-<version>/
#     bin/llama-server     the server, statically linked against llama.cpp
#     gguf-py/             llama.cpp's gguf writer (the tests write a tiny random-weight model with it)
#     models/              llama.cpp's vocab-only GGUF files (tokenizers for that model)
#     build-seconds        wall time of the build that produced this folder
# Idempotent: exits at once when that folder already holds a binary that runs.
# Environment: LLAMA_CPP_PYTHON_VERSION (default 0.3.36), LOADGEN_CACHE, BUILD_JOBS (default: cores),
# PYTHON (whose pip downloads the sdist; default python3).
set -euo pipefail
# shellcheck source=progress.sh
. "$(dirname "$0")/progress.sh"

version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
cache="${LOADGEN_CACHE:-$HOME/.cache/loadgen}"
dest="$cache/llama-server-$version"

if [ -x "$dest/bin/llama-server" ] && "$dest/bin/llama-server" --version >/dev/null 2>&1; then
  echo "llama-server $version: cached in $dest"
  exit 0
fi

python="${PYTHON:-python3}"
for tool in cmake ninja c++ "$python"; do
  if ! command -v "$tool" >/dev/null; then
    echo "build-llama-server: '$tool' not found; install it (apt-get install cmake ninja-build g++)" >&2
    exit 2
  fi
done

start=$(date +%s)
work="$(mktemp -d "${TMPDIR:-/tmp}/llama-server-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "llama-server $version: downloading the llama-cpp-python source distribution"
with_progress "llama-server $version: downloading" "$work/download.log" \
  "$python" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work/sdist" \
  || { tail -n 20 "$work/download.log" >&2; exit 1; }
tar -xzf "$work"/sdist/llama_cpp_python-*.tar.gz -C "$work"
src="$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)"

# No network at build time: the web UI is neither built (npm) nor downloaded (prebuilt assets), and
# nothing is fetched at run time (no curl, no HTTPS). A portable CPU build: the cache may outlive the CPU.
echo "llama-server $version: configuring (CPU only) in $work/build"
with_progress "llama-server $version: configuring" "$work/configure.log" \
  cmake -S "$src" -B "$work/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=OFF \
  -DLLAMA_CURL=OFF \
  -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_TOOLS=ON \
  || { tail -n 40 "$work/configure.log" >&2; exit 1; }

jobs="${BUILD_JOBS:-$(nproc)}"
echo "llama-server $version: compiling with $jobs jobs; this takes 10-17 minutes on 2 cores (582 s and 1,023 s" \
     "measured), once: the result is cached in $dest. A line every ${PROGRESS_EVERY_S:-20} s says how far it is."
with_progress "llama-server $version: compiling" "$work/build.log" \
  cmake --build "$work/build" --target llama-server -j "$jobs" \
  || { tail -n 40 "$work/build.log" >&2; exit 1; }

staging="$cache/.llama-server-$version.partial.$$"
rm -rf "$staging"
mkdir -p "$staging/bin" "$staging/models"
cp "$work/build/bin/llama-server" "$staging/bin/"
cp -r "$src/gguf-py" "$staging/gguf-py"
cp "$src"/models/ggml-vocab-*.gguf "$staging/models/"
cp "$src/LICENSE" "$staging/LICENSE"
"$staging/bin/llama-server" --version >/dev/null 2>&1
echo $(( $(date +%s) - start )) >"$staging/build-seconds"
rm -rf "$dest"
mv "$staging" "$dest"
echo "llama-server $version: built in $(cat "$dest/build-seconds") s -> $dest/bin/llama-server"
