#!/usr/bin/env bash
# Installs loom from a build folder into a temporary prefix, then builds and
# runs ggml client projects against it: one with find_package(loom), one
# with find_package(ggml) as llama.cpp and ggml's examples do; checks both
# pkg-config files, and that installed programs find libloom from that
# prefix without help from the loader's search path.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
unset LD_LIBRARY_PATH

cmake -S "$src_dir" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer_c"

cmake -S "$src_dir/ggml-package" -B "$work/build-ggml" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build-ggml" >/dev/null
"$work/build-ggml/consumer_ggml"

pc_path="$work/prefix/lib/pkgconfig:$work/prefix/lib64/pkgconfig"
PKG_CONFIG_PATH="$pc_path" pkg-config --cflags --libs loom | grep -q -- "-lloom"
PKG_CONFIG_PATH="$pc_path" pkg-config --libs ggml | grep -q -- "-lloom"
[ "$(PKG_CONFIG_PATH="$pc_path" pkg-config --modversion ggml)" = "0.25.1" ]

# An installed program runs from its prefix.
if [ -x "$work/prefix/bin/loom-run" ]; then
    "$work/prefix/bin/loom-run" --help >/dev/null
fi
echo "installed package: loom and ggml clients build and run"
