# versions_lib.sh: the delta tests' model versions, made by real AdamW steps
# (tests/tools/adamw_versions.py) into $TMP/v, version v in file v-1, and the
# checks of what nodes dumped of them (delta_pull, delta_auto, delta_bases,
# delta_stats, relay_delta, relay_delta_tp, gpu/delta_pull_gpu). Sourced after
# lib.sh; reads PY when called.

# make_versions STEPS [ARGS...]: version 1 and STEPS more of a small
# Qwen-shaped model (hidden 256, 2 layers, vocabulary 4096; adamw_versions.py
# ARGS replace those), listed in FILES; 1 when the generator failed (its log:
# $TMP/gen.log).
make_versions() {
    "$PY" "$WSYNC_ROOT/tests/tools/adamw_versions.py" "$TMP/v" --steps "$1" --hidden 256 --intermediate 704 \
        --layers 2 --heads 4 --kv-heads 2 --vocab 4096 --batch 2 --seq 32 "${@:2}" >"$TMP/gen.log" 2>&1 || return 1
    FILES=$(ls "$TMP"/v/v*.safetensors | tr '\n' ',' | sed 's/,$//')
}
# version_file V: the file version V was published from.
version_file() { printf '%s/v/v%04d.safetensors' "$TMP" $(($1 - 1)); }
# dumps_equal NODE RANKS VERSIONS...: ranks 0 to RANKS-1 of the node that
# dumped into NODE (--dump DIR: DIR/ID) hold every tensor of each version's
# file bit for bit (tests/tools/dump_equal.py: read with struct and json; one
# process for every version, a group each).
dumps_equal() {
    local node=$1 ranks=$2 v r args=()
    shift 2
    for v in "$@"; do
        args+=(-- "$(version_file "$v")")
        for ((r = 0; r < ranks; r++)); do args+=("$node/rank$r/v$v.safetensors"); done
    done
    "$PY" "$WSYNC_ROOT/tests/tools/dump_equal.py" "${args[@]}"
}
# tp_equal NODE VERSIONS...: both ranks of the TP=2 node that dumped into NODE
# hold exactly the slices tests/integration/tp_tool.py computes from each
# version's file (stdlib Python, not wsync's code).
tp_equal() {
    local node=$1 v r
    shift
    for v in "$@"; do for r in 0 1; do
        "$PY" "$WSYNC_ROOT/tests/integration/tp_tool.py" check "$(version_file "$v")" "$node/rank$r/v$v.safetensors" 2 $r ||
            { echo "$node rank$r v$v differs or is missing" >&2; return 1; }
    done; done
}
