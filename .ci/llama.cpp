#!/bin/sh
# Builds llama.cpp's `llama-bench`, `llama-quantize` and `test-backend-ops` once per machine and prints the folder
# that holds them. The sources are the llama.cpp tree that the llama-cpp-python 0.3.36 source
# package vendors (llama.cpp commit 0c1e57098), fetched with pip from the package registry; the
# build is CMake Release with -march=native (about 15-20 minutes on 2 cores, then cached).
#
#   BIN=$(.ci/llama.cpp)                      # build if needed; stdout: the bin folder only
#   "$BIN/llama-bench" -m model.gguf -t 1,2 -p 0 -n 16 -r 3 -o json
#   "$BIN/llama-quantize" in-f16.gguf out-Q4_K_M.gguf Q4_K_M
#   "$BIN/test-backend-ops" perf -o MUL_MAT -b CPU     # ggml's own matmul timings (GB/s, GFLOPS)
#
# LLAMA_CPP_HOME=DIR puts the sources and the build there (default: ~/.cache/llama.cpp-0c1e57098,
# outside the checkout, so one build serves every clone on the machine). The llama-bench crate's
# tests (crates/llama-bench/tests/real.rs) find the binaries through LLAMA_CPP_BIN=$BIN.
# Progress goes to stderr. Needs python3 with pip, and cmake + g++ (installed with apt if missing).
set -eu
VER=0.3.36
COMMIT=0c1e57098
DIR=${LLAMA_CPP_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/llama.cpp-$COMMIT}
BIN=$DIR/build/bin
if [ -x "$BIN/llama-bench" ] && [ -x "$BIN/llama-quantize" ] && [ -x "$BIN/test-backend-ops" ]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$DIR"
cd "$DIR"
if ! command -v cmake >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1; then
  echo "llama.cpp tool: installing cmake and g++" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake g++ >&2
fi
if [ ! -f src/CMakeLists.txt ]; then
  if [ ! -f "llama_cpp_python-$VER.tar.gz" ]; then
    echo "llama.cpp tool: fetching the llama-cpp-python $VER source package" >&2
    python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python \
      "llama-cpp-python==$VER" -d . >&2
  fi
  tar xzf "llama_cpp_python-$VER.tar.gz" "llama_cpp_python-$VER/vendor/llama.cpp"
  ln -sfn "llama_cpp_python-$VER/vendor/llama.cpp" src
fi
echo "llama.cpp tool: building llama-bench, llama-quantize and test-backend-ops (minutes; cached afterwards)" >&2
# The vendored tree has no .git, so the commit is passed in by hand (llama-bench reports it).
cmake -S src -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_CCACHE=OFF \
  -DLLAMA_BUILD_COMMIT=$COMMIT -DLLAMA_BUILD_NUMBER=0 >&2
cmake --build build --target llama-bench llama-quantize test-backend-ops -j"$(nproc)" >&2
[ -x "$BIN/llama-bench" ] && [ -x "$BIN/llama-quantize" ] && [ -x "$BIN/test-backend-ops" ] || { echo "llama.cpp tool: build left no binaries in $BIN" >&2; exit 1; }
echo "$BIN"
