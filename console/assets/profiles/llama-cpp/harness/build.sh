#!/bin/sh
# Builds the harness against the engine installed under /engine (headers and static
# libraries), with the image's pinned compiler. Run by the console in /harness.
# GPU=1: the engine was built with CUDA, so link its CUDA backend and runtime too.
set -eu
libs="-lllama -lggml -lggml-base -lggml-cpu"
extra=""
if [ "${GPU:-0}" = 1 ]; then
    libs="$libs -lggml-cuda"
    extra="-lcudart -lcublas -lcublasLt -lcuda -ldl -lrt"
fi
g++ -O2 -std=c++17 -o /engine/harness harness.cpp -I/engine/include \
    -L/engine/lib -Wl,--start-group $libs -Wl,--end-group $extra -lpthread -lm
