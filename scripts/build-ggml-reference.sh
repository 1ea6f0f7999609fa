#!/usr/bin/env bash
# Builds and installs the reference ggml 0.25.1 the way llama.cpp's own build
# configures it, for speed comparisons:
#
#   scripts/build-ggml-reference.sh PREFIX [native|haswell] [SOURCE_DIR]
#
# native: the CPU backend built for this processor (GGML_NATIVE); haswell:
# for the AVX2 level (AVX, AVX2, FMA, F16C, BMI2; no AVX-512), the level of
# the haswell CPU variant npm's @node-llama-cpp/linux-x64 ships. Both with
# GGML_LLAMAFILE=ON: llama.cpp's top-level CMake turns it on (its tinyBLAS
# multiplies F32, F16, BF16, Q8_0, Q4_0, Q5_0 and IQ4_NL), while ggml's own
# CMake leaves it off, which makes a standalone build slower than the ggml
# llama.cpp users run. SOURCE_DIR defaults to the checkout that
# fetch-ggml-reference.sh makes under build/reference.
set -euo pipefail
prefix=${1:?usage: $0 PREFIX [native|haswell] [SOURCE_DIR]}
level=${2:-native}
src=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$src" ]; then
    src=$("$here/fetch-ggml-reference.sh")/ggml
fi
# The standalone build wants a ggml.pc.in the llama.cpp copy leaves out;
# an empty one will do.
[ -f "$src/ggml.pc.in" ] || : > "$src/ggml.pc.in"
case "$level" in
    native) flags=(-DGGML_NATIVE=ON) ;;
    haswell) flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
                    -DGGML_AVX512=OFF) ;;
    *) echo "build-ggml-reference: level $level: native or haswell" >&2; exit 2 ;;
esac
build="$prefix.build"
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DGGML_LLAMAFILE=ON -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF "${flags[@]}" >&2
cmake --build "$build" -j "$(nproc)" >&2
cmake --install "$build" >&2
echo "$prefix"
