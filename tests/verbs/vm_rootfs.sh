#!/bin/sh
# vm_rootfs.sh DIR: builds (once) the guest of the verbs VM test under DIR: a
# Debian bookworm root file system with the software RoCE driver's userspace
# (rdma-core, ibverbs-providers, perftest) and wsync's runtime libraries, as
# an ext4 image plus the kernel and initrd to boot it with. DIR/ready marks a
# finished build, so a second run costs nothing.
set -eu
DIR=${1:?usage: vm_rootfs.sh DIR}
mkdir -p "$DIR" && DIR=$(cd "$DIR" && pwd)   # absolute, as /proc/mounts names mounts
[ -f "$DIR/ready" ] && { echo "vm: root file system cached in $DIR"; exit 0; }

die() { echo "vm: cannot build the VM image: $*" >&2; exit 1; }
command -v debootstrap >/dev/null || die "debootstrap is not installed (run: make deps-vm, as root)"
command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 is not installed (apt-get install e2fsprogs)"
[ "$(id -u)" = 0 ] || die "debootstrap needs root (run make test-verbs as root)"

# The mirror this machine's apt uses for bookworm (tests/fresh/apt_mirror.sh),
# or WSYNC_VM_MIRROR; none is named here.
. "$(dirname "$0")/../fresh/apt_mirror.sh"
MIRROR=${WSYNC_VM_MIRROR:-$(apt_mirror bookworm)}
[ -n "$MIRROR" ] || die "this machine's apt configuration (/etc/apt/sources.list, sources.list.d/*.list," \
    "*.sources) has no deb entry for bookworm; set WSYNC_VM_MIRROR to the URL of a Debian 12 mirror you may use"

PKGS=linux-image-amd64,rdma-core,ibverbs-providers,libibverbs1,perftest,iproute2,kmod,procps,psmisc,\
libjansson4,libmicrohttpd12,libcurl4,libxxhash0,libssl3,ca-certificates,curl
ROOT="$DIR/rootfs"
# debootstrap mounts /proc (and more) inside the target; a run it did not
# finish, or one that finished, may leave them mounted: unmount everything at
# or below ROOT, deepest first, before removing it and once the build is done.
unmount_root() {
    awk -v d="$ROOT" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r |
        while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
}
trap unmount_root EXIT
unmount_root
rm -rf "$ROOT" "$DIR/rootfs.img"
mkdir -p "$ROOT"
echo "vm: debootstrap bookworm from $MIRROR into $ROOT (a few minutes, once)"
debootstrap --variant=minbase --include="$PKGS" bookworm "$ROOT" "$MIRROR" >"$DIR/debootstrap.log" 2>&1 ||
    { tail -20 "$DIR/debootstrap.log" >&2; die "debootstrap failed (log: $DIR/debootstrap.log)"; }

# The guest's init: mount the kernel file systems and the repository (9p,
# read-only), then run the test script the host names on the command line
# (wsync.script=...), and power off whatever happens, so qemu exits.
cat >"$ROOT/wsync-init" <<'INIT'
#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc 2>/dev/null
mount -t sysfs sys /sys 2>/dev/null
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
modprobe 9pnet_virtio; modprobe 9p
mkdir -p /repo
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,ro wsync /repo || echo "vm-init: cannot mount the repository"
script=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^wsync.script=//p')
if [ -n "$script" ] && [ -f "/repo/$script" ]; then
    (cd /repo && sh "/repo/$script")
else
    echo "vm-init: no test script ($script)"
fi
echo "vm-init: powering off"
sync
echo o >/proc/sysrq-trigger
sleep 10
INIT
chmod +x "$ROOT/wsync-init"
echo wsync-vm >"$ROOT/etc/hostname"

cp "$ROOT"/boot/vmlinuz-* "$DIR/vmlinuz"
cp "$ROOT"/boot/initrd.img-* "$DIR/initrd.img"
# Kernel and docs are not needed inside the image; keep it small.
rm -rf "$ROOT"/usr/share/doc "$ROOT"/usr/share/man "$ROOT"/var/cache/apt/archives/*.deb
mkfs.ext4 -q -F -L wsyncroot -d "$ROOT" "$DIR/rootfs.img" 1200M ||
    die "mkfs.ext4 -d failed (needs e2fsprogs >= 1.43)"
touch "$DIR/ready"
echo "vm: root file system ready in $DIR"
