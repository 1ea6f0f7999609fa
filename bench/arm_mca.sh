#!/usr/bin/env bash
# A static estimate, not a measurement: cycles per block of the one-column
# Q4_0, Q8_0 and Q4_K products of loom's Arm tables and of ggml 0.25.1's
# (ggml-cpu/arch/arm/quants.c), and of both libraries' repacked Q4_K
# (CPU_REPACK) on the dot-product cores (ggml-cpu/arch/arm/repack.cpp), as
# llvm-mca's models of a few cores see the block loop each compiler made of
# them.
#
#   bench/arm_mca.sh            (prints a Markdown table)
#
# Both sources go through Debian's cross g++/gcc 12 (-O3, loom with its
# Release flags) for the core, to assembly; bench/arm_mca_loop.py cuts the
# block loop out (loom: the loop of one column of the matrix-vector product,
# the path mul_mat takes: gemv_one_col's two rows a step for Q4_0 and Q8_0,
# gemv_q4_K's for Q4_K; ggml: the main loop of ggml_vec_dot_*, its scalar
# tail left out) and counts the blocks one iteration covers (a block of a
# row: a loop over two rows of two blocks covers four); llvm-mca runs it 500
# times. Cycles per block = Total Cycles / 500 / blocks.
#
# Cores (llvm-mca's model, the code it runs):
#   neoverse-n1, cortex-a76  -mcpu=the core: SDOT, loom's neon_dotprod table
#   apple-m1                 GCC 12 has no apple-m1: the cortex-a76 code
#   cortex-a72               no SDOT: loom's neon table, ggml's fallback
# Needs aarch64-linux-gnu-g++ (scripts/build-arm64.sh installs it),
# llvm-mca and c++filt; ggml's source is fetched by
# scripts/fetch-ggml-reference.sh into build/reference when absent (without
# it only loom's column is filled). Nothing is run on an Arm processor: the
# figures are what the models predict for a loop in a warm cache, with every
# branch taken as the loop's, not a speed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/mca
mkdir -p "$out"
iters=500

ggml=""
if ref=$(scripts/fetch-ggml-reference.sh build/reference 2>/dev/null); then
    ggml=$ref/ggml
fi

loom_flags=(-Iinclude -Isrc -O3 -DNDEBUG -fPIC -std=c++20 -ffp-contract=off)

# kernel; values per block; loom's functions (a regex, %s the namespace)
# and which of their loops (min: the one-column loop of a kernel with wider
# ones; max: the two-row loop of gemv_one_col, Note [One column, two rows a
# step], beside its one-row tail); ggml's function
kernels=(
    "Q4_0;32;%s::.*gemv_one_col<[^>]*::Q40>;max;ggml_vec_dot_q4_0_q8_0"
    "Q8_0;32;%s::.*gemv_one_col<[^>]*::Q80>;max;ggml_vec_dot_q8_0_q8_0"
    "Q4_K;256;%s::(gemv_q4_K\\(|.*kq_gemv<[^>]*K4Levels<loom::block_q4_K, false>);min;ggml_vec_dot_q4_K_q8_K"
)
# llvm-mca's core, GCC's -mcpu, loom's namespace and file
cores=(
    "neoverse-n1|neoverse-n1|neon_dot|quants_dot.cpp"
    "cortex-a76|cortex-a76|neon_dot|quants_dot.cpp"
    "apple-m1|cortex-a76|neon_dot|quants_dot.cpp"
    "cortex-a72|cortex-a72|neon|quants.cpp"
)

per_block() { # asm functions values pick mca-cpu [--nest trips] -> cycles per block
    local loop=$out/loop.s blocks total
    blocks=$(python3 bench/arm_mca_loop.py "$1" "$2" "$3" --pick "$4" "${@:6}" 2>&1 >"$loop" |
        sed -n 's/^blocks=\([0-9.]*\).*/\1/p')
    [ -n "$blocks" ] || { echo "?"; return; }
    total=$(llvm-mca -mtriple=aarch64-linux-gnu -mcpu="$5" -iterations=$iters "$loop" 2>/dev/null |
        sed -n 's/^Total Cycles: *//p')
    python3 -c "print(f'{$total / $iters / $blocks:.2f}')"
}

echo "| core (llvm-mca 14 model) | code for | kernel | loom cycles/block | ggml cycles/block | loom / ggml |"
echo "|---|---|---|---|---|---|"
for core in "${cores[@]}"; do
    IFS='|' read -r mca_cpu gcc_cpu ns file <<<"$core"
    loom_s=$out/loom-$gcc_cpu-$ns.s
    aarch64-linux-gnu-g++ "${loom_flags[@]}" -mcpu="$gcc_cpu" -S -o "$loom_s" "src/backends/cpu/simd/neon/$file"
    ggml_s=""
    if [ -n "$ggml" ]; then
        ggml_s=$out/ggml-$gcc_cpu.s
        aarch64-linux-gnu-gcc -O3 -DNDEBUG -std=gnu11 -mcpu="$gcc_cpu" -I"$ggml/include" -I"$ggml/src" \
            -I"$ggml/src/ggml-cpu" -S -o "$ggml_s" "$ggml/src/ggml-cpu/arch/arm/quants.c"
    fi
    for k in "${kernels[@]}"; do
        IFS=';' read -r name values loom_re loom_pick ggml_fn <<<"$k"
        l=$(per_block "$loom_s" "${loom_re//%s/$ns}" "$values" "$loom_pick" "$mca_cpu")
        g="-"
        ratio="-"
        if [ -n "$ggml_s" ]; then
            g=$(per_block "$ggml_s" "^$ggml_fn\$" "$values" max "$mca_cpu")
            ratio=$(python3 -c "print(f'{$l / $g:.2f}')" 2>/dev/null || echo "?")
        fi
        echo "| $mca_cpu | -mcpu=$gcc_cpu ($ns) | $name | $l | $g | $ratio |"
    done
    # Q4_K repacked for the dot product (CPU_REPACK): loom's rows interleaved
    # by four (Note [Interleaved Q4_K rows]; the block loop of one column,
    # four rows a step) against ggml's q4_K_8x4 rows of its dot-product cores
    # (ggml_gemv_q4_K_8x4_q8_K, eight rows a step, its four groups of 64
    # values and their two rounds of scales written out: --nest 4,2).
    if [ "$ns" = neon_dot ]; then
        rl_s=$out/loom-$gcc_cpu-q4k-x4.s
        aarch64-linux-gnu-g++ "${loom_flags[@]}" -mcpu="$gcc_cpu" -S -o "$rl_s" \
            src/backends/cpu/simd/neon/q4_K_interleaved.cpp
        l=$(per_block "$rl_s" "neon_dot::.*set_cols<1>" 256 max "$mca_cpu")
        g="-"
        ratio="-"
        if [ -n "$ggml" ]; then
            rg_s=$out/ggml-$gcc_cpu-repack.s
            aarch64-linux-gnu-g++ -O3 -DNDEBUG -std=gnu++17 -mcpu="$gcc_cpu" -I"$ggml/include" -I"$ggml/src" \
                -I"$ggml/src/ggml-cpu" -S -o "$rg_s" "$ggml/src/ggml-cpu/arch/arm/repack.cpp"
            g=$(per_block "$rg_s" "^ggml_gemv_q4_K_8x4_q8_K\$" 256 max "$mca_cpu" --nest 4,2)
            ratio=$(python3 -c "print(f'{$l / $g:.2f}')" 2>/dev/null || echo "?")
        fi
        echo "| $mca_cpu | -mcpu=$gcc_cpu ($ns) | Q4_K repacked | $l | $g | $ratio |"
    fi
done
