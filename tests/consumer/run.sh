#!/usr/bin/env bash
# Installs loom from a build folder into a temporary prefix, then builds and
# runs ggml client projects against it: one with find_package(loom), one
# with find_package(ggml) as llama.cpp and ggml's examples do; checks both
# pkg-config files, and that installed programs find libloom from that
# prefix without help from the loader's search path. The tree is installed
# under one prefix and moved to another before any of it is used: the
# packages are relocatable.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/staging" >/dev/null
mv "$work/staging" "$work/prefix"
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
# A client built with pkg-config's flags alone, from the moved prefix.
# shellcheck disable=SC2046
cc -o "$work/consumer_pc" "$src_dir/main.c" $(PKG_CONFIG_PATH="$pc_path" pkg-config --cflags --libs ggml)
case "$(PKG_CONFIG_PATH="$pc_path" pkg-config --cflags ggml)" in
    *staging*) echo "pkg-config names the prefix loom was installed to, not where it is"; exit 1 ;;
esac
LD_LIBRARY_PATH="$(dirname "$(find "$work/prefix" -name 'libloom.so.*.*' | head -1)")" "$work/consumer_pc"

# ggml's library names in lib/loom-ggml, each a link to loom's library.
dropin=$(dirname "$(find "$work/prefix" -name 'libloom.so.*.*' | head -1)")/loom-ggml
for name in libggml.so.0 libggml-base.so.0 libggml-cpu.so.0 libggml-base.so libggml.v0.5.0.so; do
    [ "$(readlink -f "$dropin/$name")" = "$(readlink -f "$dropin/../libloom.so")" ] || { echo "$dropin/$name"; exit 1; }
done

# An installed program runs from its prefix.
if [ -x "$work/prefix/bin/loom-run" ]; then
    "$work/prefix/bin/loom-run" --help >/dev/null
fi
echo "installed package: loom and ggml clients build and run"
