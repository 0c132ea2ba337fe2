# Sourced by the device_*_llamacpp.sh scripts: loadgen's runtime wheels into /tmp/site, llama-server built with CUDA
# (sm_90) from .dev/llama.cpp-src.tar.xz into the layout scripts/build-llama-server.sh leaves, and the verdict's
# two models written for the shape in $shape (an array of verdict_llamacpp.py's --n-* flags) while the build runs.
# Idempotent on a warm machine: a second call finds the wheels, the binary and the models and only says so.
# Needs: $out (where logs go), stamp(). Sets: LOADGEN_CACHE, PYTHONPATH, $target.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
export LOADGEN_CACHE=/tmp/loadgen-cache
dest="$LOADGEN_CACHE/llama-server-${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
src=/tmp/llama-src/llama.cpp
if [ ! -x "$dest/bin/llama-server" ]; then
  mkdir -p /tmp/llama-src "$dest/bin" "$dest/models"
  tar -xJf .dev/llama.cpp-src.tar.xz -C /tmp/llama-src || exit 1
  cp -r "$src/gguf-py" "$dest/gguf-py"
  cp "$src"/models/ggml-vocab-llama-spm.gguf "$dest/models/"
  # the models are written while the build runs: one core and the disk against sixteen compiling
  python3 benchmarks/verdict_llamacpp.py --models-only "${shape[@]}" >"$out/models.log" 2>&1 &
  models_pid=$!
  stamp "configuring (CUDA, sm_90)"
  export CUDACXX="${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
  cmake -S "$src" -B /tmp/llama-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON >/tmp/build.log 2>&1 \
    || { tail -n 60 /tmp/build.log >"$out/build.log"; exit 1; }
  stamp "compiling llama-server and llama-batched-bench"
  cmake --build /tmp/llama-build --target llama-server llama-batched-bench -j 16 >>/tmp/build.log 2>&1 \
    || { tail -n 80 /tmp/build.log >"$out/build.log"; exit 1; }
  tail -n 5 /tmp/build.log >"$out/build.log"
  stamp "built" | tee -a "$out/build.log"
  cp /tmp/llama-build/bin/llama-server "$dest/bin/"
  "$dest/bin/llama-server" --version >>"$out/build.log" 2>&1
  wait "$models_pid" || { stamp "writing the models failed"; cat "$out/models.log"; exit 1; }
else
  stamp "llama-server with CUDA already built (a warm machine)"
  python3 benchmarks/verdict_llamacpp.py --models-only "${shape[@]}" >"$out/models.log" 2>&1 || exit 1
fi
target=$(awk '/^target /{print $2}' "$out/models.log")
stamp "models: $(du -h "$target" | cut -f1) target"
