# versions_lib.sh: the delta tests' model versions, made by real AdamW steps
# (tests/tools/adamw_versions.py) into $TMP/v, version v in file v-1, and the
# checks of what nodes dumped of them (delta_pull_test, relay_delta_tp_test).
# Sourced after lib.sh; reads PY when called.

# version_file V: the file version V was published from.
version_file() { printf '%s/v/v%04d.safetensors' "$TMP" $(($1 - 1)); }
# tp_equal NODE VERSIONS...: both ranks of the TP=2 node that dumped into NODE
# (--dump DIR: DIR/ID) hold exactly the slices tests/integration/tp_tool.py
# computes from each version's file (stdlib Python, not wsync's code).
tp_equal() {
    local node=$1 v r
    shift
    for v in "$@"; do for r in 0 1; do
        "$PY" "$WSYNC_ROOT/tests/integration/tp_tool.py" check "$(version_file "$v")" "$node/rank$r/v$v.safetensors" 2 $r ||
            { echo "$node rank$r v$v differs or is missing" >&2; return 1; }
    done; done
}
