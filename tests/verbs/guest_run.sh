#!/bin/sh
# guest_run.sh: runs inside the verbs VM (as init's child, repository at
# /repo read-only): brings up a software RoCE device on the NIC, then the
# verbs tests that need a device (and the transport conformance suite),
# the put bandwidth bench against ib_write_bw, and the end-to-end sync with faults (guest_e2e.sh). Ends
# with the line WSYNC-VM-DONE, which the host waits for.
B=/repo/build/vm-bin
export WSYNC_BIN=$B/wsync
ulimit -l unlimited
ip link set lo up
nic=$(ls /sys/class/net | grep -v '^lo$' | head -1)
ip link set "$nic" up
ip addr add 10.0.2.15/24 dev "$nic"
modprobe rdma_rxe && modprobe ib_uverbs
rdma link add rxe0 type rxe netdev "$nic" || echo "FAIL rxe_device_created: rdma link add on $nic failed"
sleep 1
echo "# rdma: $(rdma link show 2>&1 | head -2 | tr '\n' ' ')"
echo "# gid1: $(cat /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null) $(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/1 2>/dev/null)"
echo "== verbs unit tests on rxe0"
for p in transport/verbs_wire_test base/verbs_select_test transport/verbs_transport_test transport/conformance_test; do
    t=${p#*/}
    timeout 300 $B/tests/unit/common/$p 2>/tmp/$t.err || { echo "FAIL $t: exited $?"; tail -20 /tmp/$t.err; }
done
echo "== put bandwidth against ib_write_bw"
timeout 300 $B/bench/verbs_put_bw 2>&1 || echo "FAIL verbs_put_bw: exited $?"
echo "== end to end"
timeout 600 bash /repo/tests/verbs/guest_e2e.sh 2>&1
echo "WSYNC-VM-DONE"
