#!/usr/bin/env bash
# Issue 26.3: `wsync demo` stops as soon as something fails and says which
# and why. A truncated safetensors file and two files whose tensors differ
# are refused before any process starts (they ran 5 minutes and blamed the
# engines); a child that fails at start (here an engine given a transport
# that does not exist) ends the demo at once, naming the child and its error.
source "$(dirname "$0")/lib.sh"
ST="$WSYNC_ROOT/tests/integration/st_tool.py"
LIMIT=20 # seconds; the failures are immediate, this is slack for a loaded machine
export WSYNC_HOST_ID=demofail-$$

# run_demo NAME ARGS...: the demo's exit status in $rc, its seconds in $secs,
# its output in $TMP/NAME.log.
run_demo() {
    local name=$1 t0
    shift
    t0=$(date +%s)
    timeout 120 "$WSYNC" demo --versions 2 --timeout-s 100 "$@" >"$TMP/$name.log" 2>&1
    rc=$?
    secs=$(($(date +%s) - t0))
}

python3 "$ST" make "$TMP/m" 2 >/dev/null
size=$(stat -c %s "$TMP/m0.safetensors")
head -c $((size / 2)) "$TMP/m0.safetensors" >"$TMP/cut.safetensors"
run_demo truncated --safetensors "$TMP/cut.safetensors,$TMP/m1.safetensors"
check truncated_file_fails_fast [ $rc -ne 0 -a $secs -le $LIMIT ]
check truncated_file_named grep -q "cut.safetensors" "$TMP/truncated.log"
grep -q "cut.safetensors" "$TMP/truncated.log" || tail -5 "$TMP/truncated.log" >&2

# A second file with a tensor of another shape.
python3 - "$TMP/other.safetensors" "$ST" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("st", sys.argv[2]); st = importlib.util.module_from_spec(spec)
spec.loader.exec_module(st)
st.write(sys.argv[1], [("w", "F32", [3, 5], bytes(60))])
PY
run_demo differ --safetensors "$TMP/m0.safetensors,$TMP/other.safetensors"
check differing_files_fail_fast [ $rc -ne 0 -a $secs -le $LIMIT ]
check differing_files_named grep -q "other.safetensors.*differ" "$TMP/differ.log"
grep -q "differ" "$TMP/differ.log" || tail -5 "$TMP/differ.log" >&2

# A child failing after the demo started: the first one to fail is named
# with its last error line, and the demo does not wait for the others.
run_demo child --synthetic 4M --chunk 1040K --transport no-such-transport
check failing_child_ends_the_demo_fast [ $rc -ne 0 -a $secs -le $LIMIT ]
check failing_child_named_with_its_error grep -Eq "^wsync demo: engine e[0-9] rank [0-9] failed \(exit status [0-9]+\): .*transport" "$TMP/child.log"
grep -Eq "^wsync demo: engine .* failed" "$TMP/child.log" || tail -5 "$TMP/child.log" >&2
left=$(pgrep -f -- "--chunk 1040K" || true)
check no_child_left_running [ -z "$left" ]
