#!/usr/bin/env bash
# examples/manifest_builder.c (a C trainer rank and engine whose manifest
# comes from wsync_manifest_builder, issue 26.9) builds against the public
# headers and libwsync.so, and its engine holds the version with each tensor
# where the builder placed it.
source "$(dirname "$0")/lib.sh"
BUILD=${WSYNC_BUILD:-$WSYNC_ROOT/build}
if nm -D "$BUILD/libwsync.so" 2>/dev/null | grep -q ' U __asan_init'; then
    skip c_example "libwsync.so is an AddressSanitizer build (make asan): the example runs in make test"
    exit 0
fi
if ! cc -std=gnu11 -Wall -Wextra -Werror -I"$WSYNC_ROOT" "$WSYNC_ROOT/examples/manifest_builder.c" \
    -L"$BUILD" -lwsync -Wl,-rpath,"$BUILD" -o "$TMP/mb" 2>"$TMP/cc.log"; then
    fail c_example_builds "$(tail -5 "$TMP/cc.log" | tr '\n' '|')"
    exit 0
fi
pass c_example_builds
port=$(free_port); url=http://127.0.0.1:$port
bg "$WSYNC" serve --listen 127.0.0.1:$port >"$TMP/serve.log" 2>&1
wait_http "$url/healthz" 10 || { fail serve_started "$(tail -3 "$TMP/serve.log")"; exit 0; }
WSYNC_HOST_ID=cexample-$$ timeout 60 "$TMP/mb" "$url" >"$TMP/mb.log" 2>&1
rc=$?
[ $rc = 0 ] || tail -5 "$TMP/mb.log" >&2
check c_example_engine_holds_the_built_tensors [ $rc = 0 ]
check c_example_says_where grep -q 'norm.weight F32 \[64\] at offset 128000, as built' "$TMP/mb.log"
