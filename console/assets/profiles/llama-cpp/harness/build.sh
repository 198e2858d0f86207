#!/bin/sh
# Builds the harness against the engine installed under $PREFIX (headers and static
# libraries; /engine in the image, the build's own directory under --runtime local), with the
# pinned compiler. Run by the console in the harness's directory.
# GPU=1: the engine was built with CUDA, so link its CUDA backend and runtime too.
set -eu
prefix="${PREFIX:-/engine}"
libs="-lllama -lggml -lggml-base -lggml-cpu"
extra=""
if [ "${GPU:-0}" = 1 ]; then
    libs="$libs -lggml-cuda"
    # CUDA's libraries: the folders in CUDA_LIB, else beside nvcc (a CUDA install's lib64, as
    # /usr/local/cuda) and the compiler's multiarch folder (Debian's packages). No driver is
    # there at link time: stubs/ comes first, as in nvcc's own profile, so libcuda is the
    # toolkit's stub (Debian's image also holds a driver's libcuda.so), the host's at run time.
    nvcc="$(command -v nvcc || true)"
    beside="$(dirname "$(readlink -f "${nvcc:-/none}")")/../lib64"
    for d in ${CUDA_LIB:-$beside /usr/lib/$(g++ -print-multiarch)}; do
        if ls "$d"/libcudart.so* >/dev/null 2>&1; then
            if [ -e "$d/stubs/libcuda.so" ]; then extra="$extra -L$d/stubs"; fi
            extra="$extra -L$d -Wl,-rpath,$d"
        fi
    done
    if [ -z "$extra" ]; then
        echo "build.sh: no libcudart beside nvcc (${nvcc:-not on PATH}) or in /usr/lib/<multiarch>: set CUDA_LIB" >&2
        exit 1
    fi
    extra="$extra -lcudart -lcublas -lcublasLt -lcuda -ldl -lrt"
fi
g++ -O2 -std=c++17 -o "$prefix/harness" harness.cpp -I"$prefix/include" \
    -L"$prefix/lib" -Wl,--start-group $libs -Wl,--end-group $extra -lpthread -lm
