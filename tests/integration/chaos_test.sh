#!/usr/bin/env bash
# A seeded fault campaign (tests/chaos/chaos.py): no torn version among those
# the engines hold, no crash, no exit the campaign did not cause, convergence
# after the last fault. `make test` runs 30 faults; `make chaos` runs this
# script with CHAOS_FAULTS=120 (CHAOS_SEED, CHAOS_TIME_LIMIT, CHAOS_CONVERGE_S
# change the others; CHAOS_KEEP=1 keeps its work directory).
# As root every host is a network namespace on one bridge (netns.sh): the
# control endpoint, the two trainer ranks, each engine node (through a middle
# namespace, where the delay line can run) and the campaign itself, an
# operator's host; network faults then join the draw. Without root the
# deployment runs on loopback with the process faults only, and the table
# says which kinds were skipped and why.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/netns.sh"

FAULTS=${CHAOS_FAULTS:-30}
NAME=chaos_$FAULTS
if ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    skip "$NAME" "needs numpy for /usr/bin/python3 (make deps)"; exit 0
fi
args=(--wsync "$WSYNC" --faults "$FAULTS" --seed "${CHAOS_SEED:-14}" --time-limit "${CHAOS_TIME_LIMIT:-240}"
      --converge-s "${CHAOS_CONVERGE_S:-120}" ${CHAOS_KEEP:+--keep})
run=()
NET="10.$(( (($$ >> 8) & 63) + 64 )).$(( $$ & 255 ))"
if netns_begin wch$$; then
    if ! { netns_host wcc$$ "$NET.1" && netns_host wct$$ "$NET.2" && netns_host_via wce0-$$ "$NET.10" wcm0-$$ &&
           netns_host_via wce1-$$ "$NET.11" wcm1-$$ && netns_host wco$$ "$NET.3"; } 2>"$TMP/setup.err"; then
        fail "$NAME"_setup "cannot build the namespaces: $(cat "$TMP/setup.err")"; exit 1
    fi
    export NETNS_RUN DELAY_LINK
    cat >"$TMP/hosts.json" <<EOF
{"control": {"ns": "wcc$$", "ip": "$NET.1"}, "trainers": {"ns": "wct$$", "ip": "$NET.2"},
 "nodes": [{"ns": "wce0-$$", "ip": "$NET.10", "mid": "wcm0-$$"}, {"ns": "wce1-$$", "ip": "$NET.11", "mid": "wcm1-$$"}],
 "netns_sh": "$WSYNC_ROOT/tests/integration/netns.sh"}
EOF
    args+=(--hosts "$TMP/hosts.json")
    run=(ip netns exec wco$$)
else
    skip "$NAME"_network_faults "$NETNS_WHY; the process faults run on loopback"
    args+=(--no-net-reason "$NETNS_WHY")
fi
"${run[@]}" /usr/bin/python3 "$WSYNC_ROOT/tests/chaos/chaos.py" "${args[@]}" >"$TMP/chaos.out" 2>&1
rc=$?
cat "$TMP/chaos.out" >&2
# What the delay lines did, from their counters (netns.sh keeps their logs).
ls "$TMP"/delay-*.log >/dev/null 2>&1 && awk '/^delay_link: .* -> / {
        for (i = 1; i < NF; i++) { if ($i == "received") r += $(i + 1); if ($i == "lost") l += $(i + 1) } }
    END { printf "delay lines (50 ms each way, 1%% loss): %d frames received, %d lost at random (%.2f%%)\n",
          r, l, r ? 100 * l / r : 0 }' "$TMP"/delay-*.log | tee -a "$TMP/chaos.out" >&2
enough() { awk -v n="$FAULTS" '$1 == "total" { t = $2 } END { exit !(t >= n) }' "$TMP/chaos.out"; }
check "$NAME"_faults_done enough
# Each kind comes once before the weighted draws start (chaos.py).
has_kinds() { local k; for k in "$@"; do grep -Eq "^$k +[1-9]" "$TMP/chaos.out" || return 1; done; }
check "$NAME"_every_process_fault_kind has_kinds kill_engine kill_trainer kill_control stop_engine stop_trainer \
    corrupt_trainer garbage_control garbage_pull
[ ${#run[@]} = 0 ] || check "$NAME"_every_network_fault_kind has_kinds net_delay_loss net_link_cut \
    net_partition_node net_partition_control
check "$NAME"_torn_0 grep -qx 'torn: 0' "$TMP/chaos.out"
check "$NAME"_crashes_0 grep -qx 'crashes: 0' "$TMP/chaos.out"
check "$NAME"_unexpected_exits_0 grep -qx 'exits not caused by the campaign: 0' "$TMP/chaos.out"
check "$NAME"_fault_tools_worked grep -qx 'fault tool errors: 0' "$TMP/chaos.out"
check "$NAME"_converged grep -Eq '^time to converge after the last fault: [0-9.]+ s' "$TMP/chaos.out"
check "$NAME"_campaign_passed [ $rc = 0 ]
exit $rc
