#!/usr/bin/env bash
# gpu-check.sh [--rehearse]
#
# One pass over loom on an NVIDIA GPU, made to run unattended within a few
# minutes on a machine lent for one command (x86-64, CUDA toolkit, CMake,
# Ninja, no network), with what scripts/gpu-check-prepare.sh puts in .gpu/
# carried beside the working tree. Results go to $OUT: summary.md (written
# as the steps end, so a run cut short still says how far it got) and
# logs.tar.gz (every log, the environment, the build times).
#
# Without arguments (on the GPU machine):
#  1. builds loom (Release, Ninja, the CPU backend, loom-run, loom-synth,
#     loom-bench; Vulkan when the machine has an NVIDIA Vulkan driver and a
#     Vulkan kit is at hand) and, at the same time, ggml 0.25.1's llama.cpp
#     from .gpu/llama.cpp with ggml's backends as plugins: CUDA for sm_90
#     only and the one CPU variant that fits this processor, llama-bench
#     and test-backend-ops (scripts/gpu-check/CMakeLists.txt); then
#     llama.cpp's test-backend-ops against loom, and two loom-synth files: a
#     TinyLlama-shaped Q4_K_M one and a small mixture of experts (q4_0);
#  2. test-backend-ops in mode test on ggml's CUDA plugin hosted by loom
#     (ggml:CUDA0) against loom's CPU, for the operators of llama's graphs;
#  3. loom-run with every layer on ggml:CUDA0 against llama-bench of plain
#     ggml with every layer on CUDA0, alternated, on both files (prompt of
#     512 tokens, 128 generated); for the experts also with -ot exps=CPU on
#     both sides (the experts on the CPU: loom's CPU kernels beside ggml's
#     CUDA ones);
#  4. test-backend-ops of plain ggml on CUDA0, for the same operators (what
#     fails there fails without loom);
#  5. loom's Vulkan backend on the NVIDIA driver against ggml's Vulkan
#     plugin hosted by loom (.gpu/ggml-vulkan.tar.gz), when both are there.
# Each step has a time limit and runs only while the whole budget
# (GPU_CHECK_BUDGET seconds, default 450) has room for it; the rest are
# skipped, saying so.
#
# With --rehearse (any machine with the CUDA toolkit, no GPU needed): the
# same steps with the CUDA parts replaced by checks: nvcc answers, CMake
# configures loom and the CUDA plugin's tree (configure only, no build),
# the command lines of llama-bench and of the GPU runs are printed, and the
# loom-side commands that need no GPU run on loom's CPU: test-backend-ops in
# mode support with the same filters, loom-synth and loom-run with the same
# flags on small files. It uses an already built loom:
#   GPU_CHECK_LOOM_BUILD=/path/to/build scripts/gpu-check.sh --rehearse
#
# Environment: OUT (default build-gpu/out), GPU_CHECK_WORK (build-gpu),
# GPU_CHECK_BUDGET (450), GPU_CHECK_LLAMA (.gpu/llama.cpp), GPU_CHECK_JOBS
# (nproc), GPU_CHECK_LOOM_BUILD (rehearsal: the loom build to use), REPS (2),
# TBO_JOBS (test-backend-ops's parallel workers, 4).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2

mode=gpu
case ${1:-} in
    "") ;;
    --rehearse) mode=rehearse ;;
    *) sed -n '2,/^set -uo/p' "$0" | sed 's/^# \{0,1\}//; /^set -uo/d'; exit 2 ;;
esac

t0=$(date +%s)
work=${GPU_CHECK_WORK:-$root/build-gpu}
OUT=${OUT:-$work/out}
budget=${GPU_CHECK_BUDGET:-450}
jobs=${GPU_CHECK_JOBS:-$(nproc)}
llama=${GPU_CHECK_LLAMA:-$root/.gpu/llama.cpp}
reps=${REPS:-2}
tbo_jobs=${TBO_JOBS:-4}
threads=$(nproc)
mkdir -p "$work" "$OUT"
work=$(cd "$work" && pwd)
OUT=$(cd "$OUT" && pwd)
logs=$work/logs
rm -rf "$logs"
mkdir -p "$logs"
summary=$OUT/summary.md
: > "$summary"

elapsed() { echo $(($(date +%s) - t0)); }
left() { echo $((budget - $(elapsed))); }
say() { printf '%s\n' "$*" | tee -a "$summary"; }
# The logs as they are now, so that a run cut short returns them.
pack() { tar -czf "$OUT/logs.tar.gz.part" -C "$work" logs 2>/dev/null && mv "$OUT/logs.tar.gz.part" "$OUT/logs.tar.gz"; }
# limit WANTED: WANTED seconds, or what the budget has left less a reserve
# for packing the results.
limit() { local l=$(($(left) - 10)); [ "$1" -lt "$l" ] && l=$1; echo "$l"; }
# room NAME MIN: whether MIN seconds are left; says the step is skipped if not.
room() {
    if [ "$(left)" -lt "$2" ]; then
        say "- $1: skipped, $(left) s of the budget left (needs $2 s)"
        return 1
    fi
}

say "# gpu-check ($mode) $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say ""
say "loom $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet 2>/dev/null || echo ' (modified)'), llama.cpp $(cut -c1-9 "$llama/.commit" 2>/dev/null || echo '?') (ggml $(sed -n 's/^set(GGML_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\))/\2/p' "$llama/ggml/CMakeLists.txt" 2>/dev/null | paste -sd.)); budget $budget s, $jobs jobs"

# ---- the machine ------------------------------------------------------------
{
    echo "== uname"; uname -a
    echo "== cpu"; grep -m1 'model name' /proc/cpuinfo; nproc
    echo "== memory"; free -g
    echo "== nvidia-smi"; nvidia-smi 2>&1 || true
    echo "== nvcc"; nvcc --version 2>&1 || /usr/local/cuda/bin/nvcc --version 2>&1 || true
    echo "== cmake"; cmake --version 2>&1 | head -n1
    echo "== ninja"; ninja --version 2>&1
    echo "== compilers"; ${CC:-cc} --version 2>&1 | head -n1; ${CXX:-c++} --version 2>&1 | head -n1
    echo "== vulkan"; ldconfig -p 2>/dev/null | grep -i -E 'libvulkan|nvidia' || true
    ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>/dev/null || true
} > "$logs/env.txt" 2>&1
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
gpu_name=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n1)
say "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; GPU: ${gpu_name:-none}; $("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/CUDA \1/p' || echo 'no nvcc')"
say ""
if [ "$mode" = gpu ] && [ -z "$gpu_name" ]; then
    say "no GPU answers nvidia-smi: the CUDA steps will fail (use --rehearse on a machine without one)"
fi
if [ ! -x "$nvcc" ]; then
    say "FAIL: no nvcc"
    pack
    exit 1
fi
if [ ! -f "$llama/ggml/src/ggml-cuda/ggml-cuda.cu" ]; then
    say "FAIL: no llama.cpp tree at $llama (scripts/gpu-check-prepare.sh makes it; carry .gpu)"
    pack
    exit 1
fi

# ---- Vulkan: an NVIDIA driver, a loader, headers and glslc ---------------------
# The loader and the NVIDIA driver's Vulkan library may be there without the
# ICD file that names the library (containers given only the compute part of
# the driver): then a file of our own names it.
vk_icd=$(ls /usr/share/vulkan/icd.d/nvidia_icd*.json /etc/vulkan/icd.d/nvidia_icd*.json 2>/dev/null | head -n1)
if [ -z "$vk_icd" ] && ldconfig -p 2>/dev/null | grep -q 'libGLX_nvidia\.so\.0'; then
    vk_icd=$work/nvidia_icd.json
    printf '{"file_format_version": "1.0.1", "ICD": {"library_path": "libGLX_nvidia.so.0", "api_version": "1.3"}}\n' > "$vk_icd"
fi
vk_kit=""
if [ -f "$root/.gpu/vulkan-kit.tar.gz" ]; then
    rm -rf "$work/vulkan-kit"
    tar -xzf "$root/.gpu/vulkan-kit.tar.gz" -C "$work" && "$work/vulkan-kit/bin/glslc" --version > "$logs/glslc.txt" 2>&1 &&
        vk_kit=$work/vulkan-kit
fi
vk_env=()
if [ -n "$vk_icd" ]; then
    vk_env=(VK_ICD_FILENAMES="$vk_icd" VK_DRIVER_FILES="$vk_icd")
    ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1' || [ -z "$vk_kit" ] || vk_env+=(LD_LIBRARY_PATH="$vk_kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
fi
loom_vulkan=(-DLOOM_VULKAN=OFF)
if [ -n "$vk_icd" ] || [ "$mode" = rehearse ]; then
    if [ -n "$vk_kit" ]; then
        loom_vulkan=(-DLOOM_VULKAN=ON -DVulkan_INCLUDE_DIR="$vk_kit/include" -DVulkan_LIBRARY="$vk_kit/lib/libvulkan.so"
                     -DLOOM_GLSLC="$vk_kit/bin/glslc")
    else
        loom_vulkan=(-DLOOM_VULKAN=ON) # the machine's own, or OFF with CMake's warning
    fi
fi
say "Vulkan: NVIDIA ICD ${vk_icd:-none}; kit (loader, headers, glslc) ${vk_kit:-none}; loom ${loom_vulkan[0]}"

# ---- 1. builds ----------------------------------------------------------------
# ggml's CPU plugin: the one variant ggml would pick for this processor
# (GGML_NATIVE is refused with GGML_BACKEND_DL, and every variant would cost
# a minute of the budget).
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f; do case $flags in *" $f "*) ;; *) return 1 ;; esac; done; }
cpu_variant=(-DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF)
if has avx2 fma f16c bmi2; then
    cpu_variant+=(-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
    if has avx512f avx512bw avx512dq avx512vl; then
        cpu_variant+=(-DGGML_AVX512=ON)
        has avx512vbmi && cpu_variant+=(-DGGML_AVX512_VBMI=ON)
        has avx512_vnni && cpu_variant+=(-DGGML_AVX512_VNNI=ON)
        has avx512_bf16 && cpu_variant+=(-DGGML_AVX512_BF16=ON)
        has amx_tile amx_int8 && cpu_variant+=(-DGGML_AMX_TILE=ON -DGGML_AMX_INT8=ON)
    elif has avx_vnni; then
        cpu_variant+=(-DGGML_AVX_VNNI=ON)
    fi
fi
ref=$work/ggml-cuda
ref_configure=(cmake -S "$root/scripts/gpu-check" -B "$ref" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_SOURCE="$llama"
    -DLLAMA_BUILD_COMMIT="$(cut -c1-9 "$llama/.commit" 2>/dev/null || echo unknown)" -DLLAMA_BUILD_NUMBER=0
    -DGGML_CUDA=ON -DGGML_BACKEND_DL=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90
    -DGGML_CUDA_FA_QUANTS=f16-f16 -DGGML_CUDA_NCCL=OFF -DGGML_CUDA_COMPRESSION_MODE=none
    -DLLAMA_OPENSSL=OFF -DGGML_CCACHE=OFF "${cpu_variant[@]}")
ref_build=(cmake --build "$ref" -j "$jobs" --target llama-bench test-backend-ops)
loomb=$work/loom
loom_configure=(cmake -S "$root" -B "$loomb" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_BUILD_TESTS=OFF
    -DLOOM_BUILD_BENCH=OFF -DLOOM_RPC=OFF -DLOOM_BLAS=OFF "${loom_vulkan[@]}")
loom_build=(cmake --build "$loomb" -j "$jobs" --target loom-run loom-synth loom-bench)

# The files the runs use.
vocab=$root/tests/data/tokenizer/ggml-vocab-llama-spm.gguf
dense=$work/tinyllama-q4_k_m.gguf
moe=$work/moe-q4_0.gguf
if [ "$mode" = gpu ]; then
    dense_synth=(--type Q4_K_M)   # TinyLlama 1.1B's shape, loom-synth's default
    moe_synth=(--type q4_0 --embd 2048 --ff 1408 --layers 12 --heads 16 --heads-kv 4 --experts 8 --experts-used 2)
    words=511 n_gen=128
else
    dense=$work/rehearse-q4_k_m.gguf moe=$work/rehearse-moe-q4_0.gguf
    dense_synth=(--type Q4_K_M --embd 256 --ff 768 --layers 2 --heads 8 --heads-kv 2)
    moe_synth=(--type q4_0 --embd 256 --ff 256 --layers 2 --heads 8 --heads-kv 2 --experts 4 --experts-used 2)
    words=63 n_gen=8
fi
# A prompt of WORDS words (WORDS + 1 tokens with the llama vocabulary's BOS).
sentence="once upon a time there was a little girl who lived in a village near the forest and every day she walked to the river to see the birds"
prompt=$(for _ in $(seq $((words / 28 + 1))); do printf '%s ' "$sentence"; done | tr ' ' '\n' | head -n "$words" | paste -sd' ')

# loom's side: build (or, rehearsing, configure and use GPU_CHECK_LOOM_BUILD),
# test-backend-ops against it, the two files.
loom_side() {
    local s
    s=$(date +%s)
    if [ "$mode" = gpu ]; then
        "${loom_configure[@]}" > "$logs/loom-configure.log" 2>&1 &&
            "${loom_build[@]}" > "$logs/loom-build.log" 2>&1 || return 1
    else
        "${loom_configure[@]}" > "$logs/loom-configure.log" 2>&1 || return 1
    fi
    echo "loom build $(($(date +%s) - s)) s" >> "$logs/times.txt"
    local bin=${loom_bin:?} rc
    s=$(date +%s)
    "$bin/tools/loom-synth" -o "$dense" --vocab-from "$vocab" "${dense_synth[@]}" > "$logs/synth-dense.log" 2>&1 &
    "$bin/tools/loom-synth" -o "$moe" --vocab-from "$vocab" "${moe_synth[@]}" > "$logs/synth-moe.log" 2>&1 &
    local tbo_src=$llama/tests/test-backend-ops.cpp prebuilt=$bin/ggml-plugins/test-backend-ops
    if [ "$mode" = rehearse ] && [ -x "$prebuilt" ] && [ "$prebuilt" -nt "$tbo_src" ] && [ "$prebuilt" -nt "$bin/libloom.so" ]; then
        ln -sf "$prebuilt" "$work/tbo-loom" # the one scripts/test-ggml-plugins.sh built there
    else
        ${CXX:-g++} -std=c++17 -O2 -I"$root/include" "$tbo_src" -L"$bin" -lloom -Wl,-rpath,"$bin" \
            -o "$work/tbo-loom" > "$logs/tbo-loom-build.log" 2>&1
    fi
    rc=$?
    wait
    [ $rc -eq 0 ] || return 1
    echo "test-backend-ops against loom, loom-synth files $(($(date +%s) - s)) s" >> "$logs/times.txt"
    [ -s "$dense" ] && [ -s "$moe" ]
}

if [ "$mode" = gpu ]; then
    loom_bin=$loomb
else
    loom_bin=${GPU_CHECK_LOOM_BUILD:-$root/build}
    loom_bin=$(cd "$loom_bin" 2>/dev/null && pwd) || { say "FAIL: --rehearse needs a built loom (GPU_CHECK_LOOM_BUILD)"; pack; exit 1; }
    [ -x "$loom_bin/tools/loom-run" ] || { say "FAIL: no $loom_bin/tools/loom-run"; pack; exit 1; }
fi
rm -rf "$ref"
[ "$mode" = gpu ] && rm -rf "$loomb"

say ""
say "## builds (at $(elapsed) s)"
say ""
printf '%s\n' "${loom_configure[*]}" "${loom_build[*]}" "${ref_configure[*]}" "${ref_build[*]}" > "$logs/commands.txt"
s=$(date +%s)
( timeout "$(limit 330)" bash -c "$(declare -f loom_side); $(declare -p mode loom_configure loom_build logs loom_bin dense moe vocab dense_synth moe_synth llama work root); loom_side" ) &
loom_pid=$!
if [ "$mode" = gpu ]; then
    ( "${ref_configure[@]}" > "$logs/ggml-configure.log" 2>&1 && echo "ggml configure $(($(date +%s) - s)) s" >> "$logs/times.txt" &&
        timeout "$(limit 330)" "${ref_build[@]}" > "$logs/ggml-build.log" 2>&1 ) &
else
    ( "${ref_configure[@]}" > "$logs/ggml-configure.log" 2>&1 && echo "ggml configure $(($(date +%s) - s)) s" >> "$logs/times.txt" ) &
fi
ref_pid=$!
wait "$loom_pid"; loom_ok=$?
t_loom=$(($(date +%s) - s))
wait "$ref_pid"; ref_ok=$?
t_ref=$(($(date +%s) - s))
if [ "$mode" = gpu ]; then
    say "- loom (loom-run, loom-synth, loom-bench; then test-backend-ops against it, the two files): $([ $loom_ok -eq 0 ] && echo ok || echo FAIL) in $t_loom s"
    say "- ggml CUDA plugin, llama-bench, test-backend-ops (sm_90, $(grep -c 'Building CUDA object' "$logs/ggml-build.log" 2>/dev/null) .cu files): $([ $ref_ok -eq 0 ] && echo ok || echo FAIL) in $t_ref s"
else
    say "- loom: configured (${loom_vulkan[0]}), not built: using $loom_bin; then test-backend-ops against it, the two files: $([ $loom_ok -eq 0 ] && echo ok || echo FAIL) in $t_loom s"
    say "- ggml CUDA plugin tree: configure $([ $ref_ok -eq 0 ] && echo ok || echo FAIL) in $t_ref s ($(grep -c '"file": ".*\.cu"' "$ref/compile_commands.json" 2>/dev/null || echo '?') .cu files for $(sed -n 's/^-- Using CMAKE_CUDA_ARCHITECTURES=\([^ ]*\).*/\1/p' "$logs/ggml-configure.log"))"
    say "  build: ${ref_build[*]}"
fi
[ $loom_ok -eq 0 ] || tail -n 20 "$logs"/loom-*.log "$logs"/tbo-loom-build.log "$logs"/synth-*.log 2>/dev/null | tee -a "$summary"
[ $ref_ok -eq 0 ] || tail -n 30 "$logs"/ggml-*.log 2>/dev/null | tee -a "$summary"
grep -q 'Vulkan backend:' "$logs/loom-configure.log" 2>/dev/null && loom_has_vulkan=1 || loom_has_vulkan=0
pack

# ggml's CUDA plugin, hosted by loom.
host_env=(GGML_BACKEND_PATH="$ref/bin" LOOM_GGML_PLUGINS=cuda CUDA_MODULE_LOADING=EAGER)
cuda_dev=ggml:CUDA0
if [ "$mode" = gpu ] && [ $loom_ok -eq 0 ] && [ $ref_ok -eq 0 ]; then
    env "${host_env[@]}" "$loom_bin/tools/loom-run" --list-devices > "$logs/loom-devices.log" 2>&1
    if grep -q "^ *$cuda_dev " "$logs/loom-devices.log"; then
        say "- hosted: $(grep "^ *$cuda_dev " "$logs/loom-devices.log" | sed 's/^ *//; s/  */ /g')"
        cuda_ok=1
    else
        say "- FAIL: loom does not host ggml's CUDA plugin ($cuda_dev missing):"
        tail -n 10 "$logs/loom-devices.log" | tee -a "$summary"
        cuda_ok=0
    fi
else
    cuda_ok=0
fi
say ""

# ---- 2. test-backend-ops on ggml:CUDA0 against loom's CPU ----------------------------
# Groups of cases: the operators of llama's graphs, matrix products of the
# weight types of common files, the experts' products, attention with the F16
# cache (the one K-V pair the plugin is built for) at llama's head sizes.
# NAME#ARGUMENTS, the arguments separated by '#'.
tbo_groups=(
    "ops#-o#GET_ROWS,SET_ROWS,CPY,RMS_NORM,SOFT_MAX,ROPE,SWIGLU,SILU,ADD,MUL,SCALE"
    "mul_mat#-o#MUL_MAT#-p#type_a=(f16|q4_0|q8_0|q4_K|q6_K),type_b=f32"
    "mul_mat_id#-o#MUL_MAT_ID#-p#type_a=(q4_0|q4_K),type_b=f32"
    "flash_attn#-o#FLASH_ATTN_EXT#-p#hsk=(64|128),hsv=(64|128),.*type_K=f16,type_V=f16"
)
# CPY of bf16 or f16 to q8_0: rounding of ties, see scripts/test-ggml-plugins.sh.
tbo_expected='CPY\(type_src=b?f16,type_dst=q8_0,'
tbo_run() { # tbo_run SIDE BINARY DEVICE TIMEOUT ENV...: every group, one row each
    local side=$1 bin=$2 dev=$3 t=$4
    shift 4
    local g name args log rc counts unexpected n_expected j
    for g in "${tbo_groups[@]}"; do
        IFS='#' read -r -a args <<< "$g"
        name=${args[0]}
        args=("${args[@]:1}")
        room "test-backend-ops $side $name" 30 || continue
        log=$logs/tbo-$side-$name.log
        if [ "$mode" = gpu ]; then
            # Parallel workers (each with its own backends); one worker again
            # when they ended without a result.
            for j in "$tbo_jobs" 1; do
                env "$@" timeout "$(limit "$t")" stdbuf -oL "$bin" test -b "$dev" -j "$j" "${args[@]}" > "$log" 2>&1
                rc=$?
                grep -q 'tests passed$' "$log" || [ "$rc" -eq 124 ] || [ "$j" -eq 1 ] || ! room "$name with -j 1" 30 || continue
                break
            done
        else
            env "$@" timeout "$(limit "$t")" stdbuf -oL "$bin" support -b "$dev" "${args[@]}" > "$log" 2>&1
            rc=$?
        fi
        if [ "$mode" = rehearse ]; then
            say "| $side | $name | $(grep -c 'SUPPORTED' "$log") cases match the filter ($(grep -c 'NOT SUPPORTED' "$log") not supported on $dev) | status $rc |"
            continue
        fi
        counts=$(sed -n 's/^ *\([0-9]*\)\/\([0-9]*\) tests passed$/\1\/\2/p' "$log" | tail -n1)
        unexpected=$(grep '^\[' "$log" | grep 'FAIL' | grep -v -E "$tbo_expected" | head -n 5)
        n_expected=$(grep '^\[' "$log" | grep 'FAIL' | grep -c -E "$tbo_expected")
        if [ "$rc" -eq 124 ]; then
            say "| $side | $name | TIMEOUT after $t s: $(grep -c ': .*OK' "$log") cases passed, $(grep '^\[' "$log" | grep -c FAIL) failed so far | |"
        elif [ -z "$counts" ]; then
            say "| $side | $name | FAIL (status $rc): no result | $(tail -n1 "$log" | cut -c1-80) |"
        else
            say "| $side | $name | $([ -z "$unexpected" ] && [ $rc -le 1 ] && echo ok || echo FAIL) $counts pass$([ "$n_expected" -gt 0 ] && echo ", $n_expected expected CPY to q8_0") | $(echo "$unexpected" | head -n 2 | cut -c1-100 | paste -sd';') |"
        fi
        pack
    done
}

say "## test-backend-ops (at $(elapsed) s)"
say ""
say "| side | cases | result | first unexpected failures |"
say "|---|---|---|---|"
if [ "$mode" = gpu ]; then
    if [ $cuda_ok -eq 1 ]; then
        tbo_run loom "$work/tbo-loom" "$cuda_dev" 30 "${host_env[@]}"
    else
        say "| loom | all | skipped: no $cuda_dev | |"
    fi
else
    [ $loom_ok -eq 0 ] && tbo_run loom "$work/tbo-loom" CPU 60 LOOM_GGML_PLUGINS=none
    say "on the GPU: env ${host_env[*]} $work/tbo-loom test -b $cuda_dev -o OPS -p FILTER"
fi
say ""

# ---- 3. loom-run on ggml:CUDA0 against llama-bench on CUDA0 ------------------------
# loom-run: prompt and generation speeds from its report; llama-bench: the
# Markdown table (one row per test).
loom_flags=(-fa -ctk f16 -ctv f16 --temp 0 -t "$threads")
bench_flags=(-fa 1 -ctk f16 -ctv f16 -t "$threads" -r 1 -o md)
loom_speed() { # loom_speed LOG: "PROMPT_TOKENS PP TG"
    local n pp tg
    n=$(sed -n 's/^loom-run: prompt *\([0-9]*\) tokens.*/\1/p' "$1")
    pp=$(sed -n 's/^loom-run: prompt .*( *\([0-9.]*\) tokens\/s.*/\1/p' "$1")
    tg=$(sed -n 's/^loom-run: generation .*( *\([0-9.]*\) tokens\/s.*/\1/p' "$1")
    echo "${n:-?} ${pp:--} ${tg:--}"
}
bench_speed() { # bench_speed LOG: "PP TG" from llama-bench -o md
    awk -F'|' 'NF > 3 && $(NF-2) ~ /^ *pp[0-9]+ *$/ { split($(NF-1), a, " "); pp = a[1] }
               NF > 3 && $(NF-2) ~ /^ *tg[0-9]+ *$/ { split($(NF-1), a, " "); tg = a[1] }
               END { print (pp == "" ? "-" : pp), (tg == "" ? "-" : tg) }' "$1"
}
bench_pair() { # bench_pair NAME FILE "LOOM ARGS" "LLAMA-BENCH ARGS": REPS alternated rows
    local name=$1 file=$2 largs=$3 bargs=$4 rep log n lpp ltg bpp btg
    for rep in $(seq "$reps"); do
        room "bench $name rep $rep" 40 || return
        log=$logs/run-$name-loom-$rep.log
        # shellcheck disable=SC2086
        env "${host_env[@]}" timeout "$(limit 60)" "$loom_bin/tools/loom-run" -m "$file" -p "$prompt" -n "$n_gen" \
            "${loom_flags[@]}" $largs > "$log.out" 2> "$log"
        read -r n lpp ltg <<< "$(loom_speed "$log")"
        [ "$rep" -eq 1 ] && say "| $name | | $(sed -n 's/^loom-run: \(layers .*\); context.*/\1/p' "$log"); $(sed -n 's/^loom-run: graph splits: //p' "$log") | | | |"
        log=$logs/run-$name-ggml-$rep.log
        # shellcheck disable=SC2086
        timeout "$(limit 60)" "$ref/bin/llama-bench" -m "$file" -p "${n/\?/512}" -n "$n_gen" "${bench_flags[@]}" $bargs \
            > "$log.md" 2> "$log"
        read -r bpp btg <<< "$(bench_speed "$log.md")"
        say "| $name | $rep | $lpp | $bpp | $(ratio "$lpp" "$bpp") | $ltg | $btg | $(ratio "$ltg" "$btg") |"
        pack
    done
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }

say "## loom-run on $cuda_dev against llama-bench (plain ggml, CUDA0) (at $(elapsed) s)"
say ""
say "prompt $((words + 1)) tokens, $n_gen generated; loom-run ${loom_flags[*]}; llama-bench ${bench_flags[*]}; CUDA_MODULE_LOADING=EAGER on both sides"
say ""
say "| file | rep | loom pp t/s | ggml pp t/s | loom/ggml | loom tg t/s | ggml tg t/s | loom/ggml |"
say "|---|---|---|---|---|---|---|---|"
if [ "$mode" = gpu ]; then
    if [ $cuda_ok -eq 1 ]; then
        bench_pair dense "$dense" "--device $cuda_dev" "-ngl 99"
        bench_pair moe "$moe" "--device $cuda_dev" "-ngl 99"
        # The experts on the CPU (loom's CPU kernels for loom-run), the rest on CUDA.
        bench_pair moe-exps-cpu "$moe" "--device $cuda_dev -ot exps=CPU" "-ngl 99 -ot exps=CPU"
    else
        say "| all | | skipped: no $cuda_dev | | | | | |"
    fi
else
    # Rehearsal: loom-run with the same flags on loom's CPU, the GPU's command lines printed.
    for f in dense moe; do
        file=$dense
        [ $f = moe ] && file=$moe
        log=$logs/run-$f-loom-rehearse.log
        timeout "$(limit 60)" "$loom_bin/tools/loom-run" -m "$file" -p "$prompt" -n "$n_gen" "${loom_flags[@]}" --device cpu \
            > "$log.out" 2> "$log"
        rc=$?
        read -r n lpp ltg <<< "$(loom_speed "$log")"
        say "| $f (loom's CPU, status $rc) | 1 | $lpp | - | - | $ltg | - | - |"
        say "  - on the GPU: env ${host_env[*]} loom-run -m $file -p <$n tokens> -n $n_gen ${loom_flags[*]} --device $cuda_dev"
        say "  - on the GPU: $ref/bin/llama-bench -m $file -p $n -n $n_gen ${bench_flags[*]} -ngl 99$([ $f = moe ] && echo "; and with -ot exps=CPU")"
    done
    # loom-run's -ot as the GPU run gives it (here every layer is on the CPU already).
    log=$logs/run-moe-ot-loom-rehearse.log
    timeout "$(limit 60)" "$loom_bin/tools/loom-run" -m "$moe" -p "$prompt" -n "$n_gen" "${loom_flags[@]}" --device cpu \
        -ot exps=CPU > "$log.out" 2> "$log"
    say "  - loom-run -ot exps=CPU (status $?): $(sed -n 's/^loom-run: \([0-9]* weights placed by --override-tensor\)/\1/p' "$log")"
    # The report lines the table reads, on a llama-bench table of the same form.
    printf '| model | size | params | backend | ngl | fa | test | t/s |\n| --- | ---: | ---: | --- | --: | -: | --: | --: |\n| llama 1B Q4_K - Medium | 636.18 MiB | 1.10 B | CUDA | 99 | 1 | pp512 | 12345.67 ± 0.00 |\n| llama 1B Q4_K - Medium | 636.18 MiB | 1.10 B | CUDA | 99 | 1 | tg128 | 345.67 ± 0.00 |\n' > "$logs/bench-parse-sample.md"
    say "  - llama-bench's table as read: $(bench_speed "$logs/bench-parse-sample.md") (from pp512 12345.67, tg128 345.67)"
fi
say ""

# ---- 4. test-backend-ops of plain ggml on CUDA0 ----------------------------------
say "## test-backend-ops of plain ggml (CUDA0 against ggml's CPU) (at $(elapsed) s)"
say ""
say "| side | cases | result | first unexpected failures |"
say "|---|---|---|---|"
if [ "$mode" = gpu ] && [ $ref_ok -eq 0 ]; then
    tbo_run ggml "$ref/bin/test-backend-ops" CUDA0 30 CUDA_MODULE_LOADING=EAGER
elif [ "$mode" = rehearse ]; then
    say "on the GPU: $ref/bin/test-backend-ops test -b CUDA0 -o OPS -p FILTER (the same groups)"
else
    say "| ggml | all | skipped: no build | |"
fi
say ""

# ---- 5. Vulkan: loom's backend against ggml's plugin, on the NVIDIA driver ---------------
say "## Vulkan on the NVIDIA driver (at $(elapsed) s)"
say ""
vk_ggml=""
if [ -f "$root/.gpu/ggml-vulkan.tar.gz" ]; then
    mkdir -p "$work/ggml-vulkan" && tar -xzf "$root/.gpu/ggml-vulkan.tar.gz" -C "$work/ggml-vulkan" && vk_ggml=$work/ggml-vulkan
fi
if [ "$mode" = rehearse ]; then
    say "- loom's configure: $([ "$loom_has_vulkan" -eq 1 ] && echo 'Vulkan backend found' || echo 'no Vulkan backend'); ggml's plugin: ${vk_ggml:-not carried}"
    say "- on the GPU: env ${vk_env[*]:-} GGML_VK_VISIBLE_DEVICES=0 loom-run -m $dense ... --device Vulkan0, and with GGML_BACKEND_PATH=$work/ggml-vulkan LOOM_GGML_PLUGINS=vulkan --device ggml:Vulkan0"
elif [ -z "$vk_icd" ]; then
    say "- skipped: no NVIDIA Vulkan driver (no ICD file, no libGLX_nvidia.so.0)"
elif [ "$loom_has_vulkan" -eq 0 ] || [ $loom_ok -ne 0 ]; then
    say "- skipped: loom was built without its Vulkan backend (no loader, headers or glslc: see logs/loom-configure.log)"
else
    vk_run=(env "${vk_env[@]}" GGML_VK_VISIBLE_DEVICES=0)
    [ -n "$vk_ggml" ] && vk_run+=(GGML_BACKEND_PATH="$vk_ggml" LOOM_GGML_PLUGINS=vulkan)
    "${vk_run[@]}" "$loom_bin/tools/loom-run" --list-devices > "$logs/vulkan-devices.log" 2>&1
    grep -E '^ *(ggml:)?Vulkan0 ' "$logs/vulkan-devices.log" | sed 's/^ */- /' | tee -a "$summary"
    say ""
    say "| device | rep | pp t/s | tg t/s | layers; splits |"
    say "|---|---|---|---|---|"
    for dev in Vulkan0 ggml:Vulkan0; do
        grep -q "^ *$dev " "$logs/vulkan-devices.log" || { say "| $dev | | not found | | |"; continue; }
        for rep in $(seq "$reps"); do
            room "Vulkan $dev rep $rep" 40 || break
            log=$logs/vulkan-$dev-$rep.log
            "${vk_run[@]}" timeout "$(limit 90)" "$loom_bin/tools/loom-run" -m "$dense" -p "$prompt" -n "$n_gen" "${loom_flags[@]}" \
                --device "$dev" > "$log.out" 2> "$log"
            read -r n lpp ltg <<< "$(loom_speed "$log")"
            say "| $dev | $rep | $lpp | $ltg | $(sed -n 's/^loom-run: \(layers [^;]*\);.*/\1/p' "$log"); $(sed -n 's/^loom-run: graph splits: //p' "$log") |"
        done
    done
fi
say ""
say "done in $(elapsed) s of $budget"
pack
echo "results: $OUT (summary.md, logs.tar.gz)"
