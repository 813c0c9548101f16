#!/usr/bin/env bash
# `wsync plan`: the summary adds up (every byte sent once per node, landed once,
# copied to every other local rank), safetensors files and synthetic models
# both work, and bad options exit 2 with a message naming the problem.
source "$(dirname "$0")/lib.sh"

# Checks a --json plan with python: sends, landings and copies add up.
# usage: plan_adds_up FILE W M L
plan_adds_up() {
    python3 - "$@" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); W, M, L = map(int, sys.argv[2:5])
img = p["image_size"]
assert p["trainers"] == W and p["engines"] == M and p["local_ranks"] == L, "topology echoed wrong"
assert len(p["trainer_ranks"]) == W and len(p["engine_local_ranks"]) == L
assert sum(t["send_bytes_per_node"] for t in p["trainer_ranks"]) == img, "sends per node != image"
assert all(t["send_bytes_total"] == M * t["send_bytes_per_node"] for t in p["trainer_ranks"])
assert sum(t["pieces"] for t in p["trainer_ranks"]) == p["pieces"]
assert p["chunks"] == -(-img // p["chunk_size"])
lr = p["engine_local_ranks"]
assert sum(r["land_bytes"] for r in lr) == img, "landed != image"
assert sum(r["chunks"] for r in lr) == p["chunks"]
fair = -(-img // L)
for r in lr:
    assert r["land_bytes"] <= fair + p["chunk_size"], "unbalanced landing"
    assert r["copy_in_bytes"] == img - r["land_bytes"]
    assert r["copied_out_bytes"] == (L - 1) * r["land_bytes"]
assert p["per_node"] == {"network_bytes": img, "intra_node_copy_bytes": (L - 1) * img}
assert p["total"] == {"network_bytes": M * img, "intra_node_copy_bytes": M * (L - 1) * img}
PY
}

out=$("$WSYNC" plan --synthetic 256M 2>&1); rc=$?
if [ $rc = 0 ] && grep -q '^chunks *4 of 64.00 MiB' <<<"$out" && grep -q 'TRAINER RANK' <<<"$out" \
   && grep -q "COPIES FROM PEERS' WINDOWS" <<<"$out" && [ "$(grep -c '^[01] ' <<<"$out")" = 4 ]; then
    pass plan_synthetic_defaults_text
else fail plan_synthetic_defaults_text "rc=$rc: $out"; fi

ok=1
for topo in "2 2 2 64M even" "3 4 3 16M fsdp" "64 1 16 4K even" "5 2 7 1000K fsdp" "1 1 1 4352 even"; do
    set -- $topo
    if ! "$WSYNC" plan --synthetic 40M --trainers "$1" --engines "$2" --local-ranks "$3" --chunk "$4" \
         --layout "$5" --json >"$TMP/p.json" 2>"$TMP/err" || ! plan_adds_up "$TMP/p.json" "$1" "$2" "$3" 2>>"$TMP/err"; then
        ok=0; echo "topology $topo: $(cat "$TMP/err")" >&2
    fi
done
check plan_json_adds_up_over_topologies [ $ok = 1 ]

# A safetensors file written by python: the plan covers the image wsync inspect reports.
python3 "$WSYNC_ROOT/tests/integration/st_tool.py" make "$TMP/m" 1 >/dev/null
img=$("$WSYNC" inspect --json "$TMP/m0.safetensors" | python3 -c 'import json,sys; print(json.load(sys.stdin)["image_size"])')
if "$WSYNC" plan "$TMP/m0.safetensors" --layout fsdp --trainers 3 --local-ranks 4 --chunk 4K --json >"$TMP/f.json" \
   && plan_adds_up "$TMP/f.json" 3 2 4 \
   && [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["image_size"])' "$TMP/f.json")" = "$img" ]; then
    pass plan_safetensors_file_fsdp
else fail plan_safetensors_file_fsdp "image $img: $(head -c 400 "$TMP/f.json")"; fi

# Bad input: exit 2 and a message that names what is wrong.
bad() { # NAME EXPECTED-TEXT ARGS...
    local name=$1 want=$2; shift 2
    local err rc
    err=$("$WSYNC" plan "$@" 2>&1 >/dev/null); rc=$?
    if [ $rc = 2 ] && grep -qF -- "$want" <<<"$err"; then pass "$name"; else fail "$name" "rc=$rc: $err"; fi
}
printf 'not a safetensors file' >"$TMP/bad.safetensors"
bad plan_bad_chunk_multiple "not a multiple of 256" --synthetic 1G --chunk 5000
bad plan_bad_chunk_zero "--chunk: expected a size such as 4096, 64M or 1G, from 4K" --synthetic 1G --chunk 0
bad plan_bad_trainers "--trainers: expected a whole number" --synthetic 1G --trainers 0
bad plan_bad_engines "--engines: expected a whole number" --synthetic 1G --engines two
bad plan_bad_local_ranks "--local-ranks: expected a whole number" --synthetic 1G --local-ranks -1
bad plan_bad_layout "--layout: expected 'even' or 'fsdp'" --synthetic 1G --layout tp
bad plan_bad_size "--synthetic: expected a size" --synthetic lots
bad plan_no_model "none was given"
bad plan_file_and_synthetic "not both" "$TMP/m0.safetensors" --synthetic 1G
bad plan_unknown_option "unrecognized option" --synthetic 1G --bogus
bad plan_malformed_file "bad.safetensors" "$TMP/bad.safetensors"
