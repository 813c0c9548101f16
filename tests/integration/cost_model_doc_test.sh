#!/usr/bin/env bash
# docs/COST_MODEL.md says what the model prints: every `build/wsync plan`
# command of its console blocks runs as written (from the repository's
# folder), its reference table's predicted column is what --scenarios
# prints, and its figures for wsync's plans on the H20 pair and at scale are
# the commands' own (rounded as the doc writes them).
source "$(dirname "$0")/lib.sh"
cd "$WSYNC_ROOT" || exit 1
DOC=docs/COST_MODEL.md
H20=configs/links/h20-roce-2x8.json

# Every console command of the doc, as written, with build/wsync -> $WSYNC.
python3 - "$DOC" >"$TMP/cmds" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
for block in re.findall(r"```console\n(.*?)```", text, re.S):
    for cmd in re.sub(r"\\\n\s*", "", block).splitlines():
        if cmd.startswith("build/wsync plan"):
            print(cmd)
PY
ok=1; n=0
while IFS= read -r cmd; do
    n=$((n + 1))
    if ! eval "\"\$WSYNC\" ${cmd#build/wsync }" >"$TMP/out.$n" 2>&1; then ok=0; echo "'$cmd' failed: $(tail -3 "$TMP/out.$n")" >&2; fi
done <"$TMP/cmds"
check cost_model_doc_commands_run_as_written [ $ok = 1 -a $n -ge 4 ]

# The reference table: predicted column = the command's output.
"$WSYNC" plan --synthetic 8G --chunk 256M --trainers 8 --engines 1 --local-ranks 8 --links $H20 --predict \
    --scenarios --json >"$TMP/sc.json"
predict() { "$WSYNC" plan --links $H20 --predict --json "$@"; }
predict --synthetic 8G --trainers 8 --engines 1 --local-ranks 8 >"$TMP/own_put.json"
predict --synthetic 8G --trainers 8 --engines 1 --local-ranks 8 --transport staged >"$TMP/own_staged.json"
predict --synthetic 8G --trainers 8 --engines 16 --local-ranks 8 >"$TMP/many.json"
predict --synthetic 1000000000000 --trainers 256 --engines 16 --local-ranks 8 --replica-gpus 8 >"$TMP/r8.json"
predict --synthetic 1000000000000 --trainers 256 --engines 16 --local-ranks 8 --replica-gpus 16 >"$TMP/r16.json"
"$WSYNC" plan --links configs/links/h200-8x400g.json --predict --json --synthetic 1000000000000 --trainers 256 \
    --engines 16 --local-ranks 8 --replica-gpus 16 --delta-density 0.02 --delta-width 1 >"$TMP/delta.json"
"$WSYNC" plan --links configs/links/h200-8x400g.json --predict --json --synthetic 15231233024 --transport local \
    --trainers 1 --engines 1 --local-ranks 1 --delta-density 0.02 >"$TMP/delta_local.json"
if python3 - "$TMP" "$DOC" <<'PY'
import json, re, sys
tmp, doc = sys.argv[1], open(sys.argv[2]).read()
sc = json.load(open(tmp + "/sc.json"))["scenarios"]
got = {(s["name"], s["method"], s["senders"]):
       round(s["gbps"], 1) if s["name"] == "incast" else round(s["predicted_s"] * 1e3, 1) for s in sc}
rows = re.findall(r"^\| `([a-z-]+)` \| (staged|put) \| (\d+) \| ([0-9.]+) \|", doc, re.M)
assert len(rows) == len(got) == 18, (len(rows), len(got))
for name, method, senders, pred in rows:
    want = got[(name, method, int(senders))]
    assert abs(float(pred) - want) < 0.051, ("reference row", name, method, senders, pred, want)
def plans(f):
    p = json.load(open(tmp + "/" + f))
    return {x["name"]: x["predicted_s"] * 1e3 for x in p["plans"]}, p["chosen"], p["floor_s"] * 1e3
def says(text):
    assert text in doc, "the doc does not say: " + text
own, chosen, _ = plans("own_put.json")
assert chosen == "direct" and own["direct"] <= 71.5
says("**direct, %.1f ms**" % own["direct"])
st, _, _ = plans("own_staged.json")
says("`--transport staged`: %.1f ms" % st["direct"])
many, chosen, _ = plans("many.json")
assert chosen == "relay:1", chosen
says("gives direct %.1f ms" % many["direct"]); says("against relay:1 %.1f ms" % many["relay:1"])
for f, label in (("r8.json", "| 8 GPUs"), ("r16.json", "| 16 GPUs")):
    p, chosen, floor = plans(f)
    line = [l for l in doc.splitlines() if l.startswith(label)][0]
    for v in (floor, p["direct"], p["relay:1"], p["relay:2"]):
        assert "%.1f ms" % v in line, (label, v, line)
    assert chosen == "direct" and ("%.2fx the floor" % (p["direct"] / floor)) in line, line
# Delta pulls at scale: the figures of the delta section, the choice, and the target (<= 0.25 s).
p, chosen, floor = plans("delta.json")
d = json.load(open(tmp + "/delta.json"))
says("full direct **%.1f ms**" % p["direct"]); says("direct+delta **%.1f ms**" % p["direct+delta"])
says("the floor %.1f ms" % floor)
assert chosen == "direct" and d["chosen_delta"] and p["direct+delta"] <= 250, (chosen, p["direct+delta"])
p, chosen, _ = plans("delta_local.json")
says("full **%.1f ms**" % p["direct"]); says("direct+delta **%.1f ms**" % p["direct+delta"])
assert not json.load(open(tmp + "/delta_local.json"))["chosen_delta"] and p["direct"] < p["direct+delta"]
PY
then pass cost_model_doc_figures_are_the_models_output
else fail cost_model_doc_figures_are_the_models_output "see the python error above"; fi
