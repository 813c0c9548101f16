#!/usr/bin/env bash
# docs_test.sh: the docs live in the repository and their examples run.
# (a) README.md, docs/*.md and bench/RESULTS.md name no file outside the
#     repository (every *.md they mention and every relative link exists in
#     it; no path of a particular machine), and no tracked file refers to the
#     design notes kept outside it.
# (b) The ```sh blocks of README.md and docs/*.md run as written, in order, in
#     one shell per document (as root in a network namespace of their own, so
#     the examples' fixed ports cannot clash with anything); each block must
#     exit 0. README.md's run as a reader's would after the quick start: in
#     the repository's directory (a temporary one holding links to its
#     entries, build/ the build under test, so what the examples write stays
#     out of the tree), with PATH as the test found it: nothing here puts
#     wsync on it (issue 26.4). docs/*.md's run in an empty directory with
#     build/wsync on PATH. ```text and ```console blocks are output or not
#     meant to run here.
source "$(dirname "$0")/lib.sh"

NAME=docs
cd "$WSYNC_ROOT" || exit 1
BUILD=${WSYNC_BUILD:-$WSYNC_ROOT/build}

# --- (a) references ----------------------------------------------------------
/usr/bin/python3 - "$WSYNC_ROOT" README.md docs/*.md bench/RESULTS.md >"$TMP/refs.out" <<'PY'
import os, re, sys
root = os.path.realpath(sys.argv[1])
# Paths of the machines the project was developed on, never of a user's.
MACHINE = re.compile(r"(?<![\w.])(/work/|/home/|/shared/|\.\./shared|/tmp/fresh)")
for doc in sys.argv[2:]:
    text = open(os.path.join(root, doc), encoding="utf-8").read()
    base = os.path.dirname(os.path.join(root, doc))
    bad = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in MACHINE.finditer(line):
            bad.append(f"line {n}: '{m.group(1)}' is a path outside the repository")
        targets = [t for t in re.findall(r"\]\(([^)\s]+)\)", line)]
        targets += [t for t in re.findall(r"[\w./-]+\.md\b", line) if "](" + t not in line]
        for t in targets:
            if re.match(r"[a-z]+://|mailto:|#", t):
                continue
            path = t.split("#")[0]
            cands = [os.path.realpath(os.path.join(base, path)), os.path.realpath(os.path.join(root, path))]
            inside = [c for c in cands if c == root or c.startswith(root + os.sep)]
            if not inside:
                bad.append(f"line {n}: '{t}' points outside the repository")
            elif not any(os.path.exists(c) for c in inside):
                bad.append(f"line {n}: '{t}' names a file the repository does not have")
    name = "refs_" + doc.replace("/", "_")
    print(f"FAIL {name}: " + "; ".join(bad) if bad else f"PASS {name}")
PY
cat "$TMP/refs.out"
# Comments and docs anywhere in the tree: no pointers to the design notes
# that lived next to the repository during development.
outside=$(git ls-files | grep -v '^tests/integration/docs_test.sh$' |
    xargs grep -lE '\.\./shared|(DESIGN|STYLE|GPU|MACHINE)\.md|/work/' 2>/dev/null)
if [ -z "$outside" ]; then pass "$NAME"_tree_refs
else fail "$NAME"_tree_refs "files referring outside the repository: $(echo $outside)"; fi

# --- (b) examples ------------------------------------------------------------
# run_doc DOC: its ```sh blocks as one script; each block prints a marker
# when it finished, the ERR trap names the block that failed.
run_doc() {
    local doc=$1 script=$TMP/$(echo "$1" | tr '/' '_').sh
    local work; work=$(mktemp -d "$TMP/work.XXXXXX")
    /usr/bin/python3 - "$doc" >"$script" <<'PY' || return 1
import re, sys
doc = sys.argv[1]
lines = open(doc, encoding="utf-8").read().splitlines()
print('set -eE\ntrap \'echo "BLOCK-FAILED $__blk exit $?: $BASH_COMMAND" >&3\' ERR')
i = 0
while i < len(lines):
    if re.match(r"^```sh\s*$", lines[i]):
        start, i = i + 1, i + 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i]); i += 1
        print(f"__blk={start}")
        print("\n".join(body))
        print(f'echo "BLOCK-DONE {start}" >&3')
    i += 1
PY
    local blocks
    blocks=$(grep -c '^__blk=' "$script")
    [ "$blocks" -gt 0 ] || return 0
    local runner=(bash "$script")
    if [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null; then
        runner=(unshare -n sh -c 'ip link set lo up && exec bash "$0"' "$script")
    fi
    local path="$BUILD:$PATH"
    if [ "$doc" = README.md ]; then
        local e
        for e in "$WSYNC_ROOT"/*; do [ "$(basename "$e")" = build ] || ln -s "$e" "$work/"; done
        ln -s "$BUILD" "$work/build"
        path=$PATH
    fi
    # A session of its own: whatever the examples leave running goes with it.
    (cd "$work" && PATH="$path" exec setsid timeout 300 "${runner[@]}" \
        >"$TMP/doc.out" 2>"$TMP/doc.err" 3>"$TMP/doc.marks" </dev/null) &
    local pid=$!
    wait "$pid"; local rc=$?
    kill -9 -- "-$pid" 2>/dev/null
    local l
    for l in $(grep '^__blk=' "$script" | cut -d= -f2); do
        local n="$NAME"_run_$(echo "$doc" | tr '/' '_')_line_$l
        if grep -qx "BLOCK-DONE $l" "$TMP/doc.marks"; then pass "$n"
        elif grep -q "^BLOCK-FAILED $l " "$TMP/doc.marks"; then
            fail "$n" "$(grep "^BLOCK-FAILED $l " "$TMP/doc.marks" | head -1); stderr: $(tail -5 "$TMP/doc.err" | tr '\n' '|')"
        else fail "$n" "not reached (the run ended with status $rc; stderr: $(tail -3 "$TMP/doc.err" | tr '\n' '|'))"; fi
    done
}
for doc in README.md docs/*.md; do run_doc "$doc"; done
exit 0
