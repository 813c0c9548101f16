# tp_delta_lib.sh: a TP=2 node receiving delta versions in place into its
# own tensors (tests/python/tp_delta_engine.py), shared by delta_pull_test
# (host memory, through the sparse GPU image's path: WSYNC_TEST_HOST_FAN_WINDOW)
# and tests/gpu/delta_pull_gpu_test (a sparse GPU image on cuda:0). Sourced
# after lib.sh, with PY (a python with torch), FILES (the versions'
# safetensors files, comma-separated) and $TMP/v (the directory holding them).

# tp_delta_node NAME VERSIONS DEVICE [ENV...]: a control endpoint, the node's
# two ranks (python, tensors on DEVICE, ENV in their environment) and two
# trainer ranks (`wsync trainer`, their slots on DEVICE), all over tcp
# (WSYNC_LOCAL_TRANSPORT=0: tcp stands in for trainers on another host);
# prints the ranks' PASS/FAIL lines prefixed with NAME, then
# NAME_engines_exit_0. Logs: $TMP/NAME-e0.log, -e1.log, -t0.log, -t1.log.
tp_delta_node() {
    local name=$1 nv=$2 dev=$3 port url r pids=() ok=1 tdev=$3
    shift 3
    [ "$dev" = cpu ] && tdev=host
    port=$(free_port)
    url=http://127.0.0.1:$port
    bg "$WSYNC" serve --listen 127.0.0.1:$port >"$TMP/$name-serve.log" 2>&1
    wait_http "$url/healthz" || { fail "${name}_engines_exit_0" "control endpoint did not come up"; return; }
    for r in 0 1; do
        env WSYNC_ROOT="$WSYNC_ROOT" WSYNC_LIB="${WSYNC_BUILD:-$WSYNC_ROOT/build}/libwsync.so" \
            WSYNC_HOST_ID="tpd-$name-$$" WSYNC_LOCAL_TRANSPORT=0 WSYNC_LOG=info "$@" timeout 240 "$PY" \
            "$WSYNC_ROOT/tests/python/tp_delta_engine.py" "$url" "e-$name" $r "$nv" "$TMP/v" "$dev" \
            >"$TMP/$name-e$r.log" 2>&1 &
        pids+=($!)
        WSYNC_PIDS+=($!)
    done
    wait_registered "$url" "e-$name"
    for r in 0 1; do
        bg env WSYNC_LOCAL_TRANSPORT=0 timeout 240 "$WSYNC" trainer --control "$url" --rank $r --world 2 \
            --safetensors "$FILES" --versions "$nv" --chunk 256K --device "$tdev" --interval-ms 500 --wait-engines 1 \
            >"$TMP/$name-t$r.log" 2>&1
    done
    for r in "${pids[@]}"; do wait "$r" || ok=0; done
    cat "$TMP/$name"-e*.log | grep -E '^(PASS|FAIL|SKIP) ' | sed "s/^\(PASS\|FAIL\|SKIP\) /\1 ${name}_/"
    if [ $ok = 1 ]; then pass "${name}_engines_exit_0"
    else fail "${name}_engines_exit_0" "$(grep -h -v '^PASS' "$TMP/$name"-e*.log | tail -n 8 | tr '\n' ' ')"; fi
}
