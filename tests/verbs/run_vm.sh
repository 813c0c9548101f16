#!/bin/sh
# run_vm.sh: `make test-verbs`. Builds wsync for the guest (no CUDA/NCCL),
# builds the guest image once (vm_rootfs.sh), boots it under qemu with the
# repository shared read-only over 9p, and runs tests/verbs/guest_run.sh in
# it on the software RoCE device rdma_rxe. Prints the guest's PASS/FAIL
# lines and ends with "N passed, N failed"; exits non-zero on any failure.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM=${WSYNC_VM_DIR:-$ROOT/build/vm}
ACCEL=${WSYNC_VM_ACCEL:-tcg}
LIMIT=${WSYNC_VM_TIMEOUT_S:-1200}
cd "$ROOT" || exit 1

die() { echo "test-verbs: $*" >&2; exit 1; }
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is not installed (make deps EXTRA_PKGS='qemu-system-x86 debootstrap', as root)"
echo "test-verbs: building wsync for the guest (build/vm-bin, CUDA=0 NCCL=0)"
mkdir -p build
make --no-print-directory -j2 BUILD=build/vm-bin CUDA=0 NCCL=0 VERBS=1 build/vm-bin/wsync \
    build/vm-bin/tests/unit/common/transport/verbs_transport_test \
    build/vm-bin/tests/unit/common/transport/verbs_wire_test \
    build/vm-bin/tests/unit/common/base/verbs_select_test \
    build/vm-bin/tests/unit/common/transport/conformance_test build/vm-bin/bench/verbs_put_bw >build/vm-bin.log 2>&1 ||
    { tail -20 build/vm-bin.log >&2; die "building the guest binaries failed (log: build/vm-bin.log)"; }
mkdir -p "$VM"
tests/verbs/vm_rootfs.sh "$VM" || die "no VM image, so no verbs test (see the message above)"

log=$VM/console.log
echo "test-verbs: booting the guest (qemu -accel $ACCEL; console in $log)"
t0=$(date +%s)
timeout "$LIMIT" qemu-system-x86_64 -accel "$ACCEL" -m 2G -smp 2 -nographic -no-reboot \
    -kernel "$VM/vmlinuz" -initrd "$VM/initrd.img" \
    -append "console=ttyS0 root=/dev/vda rw quiet loglevel=3 init=/wsync-init panic=-1 wsync.script=tests/verbs/guest_run.sh" \
    -drive file="$VM/rootfs.img",format=raw,if=virtio,snapshot=on \
    -virtfs local,path="$ROOT",mount_tag=wsync,security_model=none,readonly=on \
    -nic user,model=virtio-net-pci </dev/null >"$log" 2>&1
rc=$?
t1=$(date +%s)
tr -d '\r' <"$log" | grep -E '^(PASS|FAIL|SKIP|#|==|wsync verbs|ib_write_bw|ratio)' | sed 's/^/  /'
pass=$(tr -d '\r' <"$log" | grep -c '^PASS ')
fail=$(tr -d '\r' <"$log" | grep -c '^FAIL ')
if ! tr -d '\r' <"$log" | grep -q '^WSYNC-VM-DONE'; then
    echo "test-verbs: the guest did not finish (qemu rc=$rc after $((t1 - t0)) s); last console lines:" >&2
    tr -d '\r' <"$log" | tail -25 | sed 's/^/  | /' >&2
    fail=$((fail + 1))
fi
echo "test-verbs: guest ran $((t1 - t0)) s"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
