#!/usr/bin/env bash
# tests/fresh/run.sh: `make test-fresh`. Does what a new user does on a fresh
# Debian 12 with only git, make and ca-certificates: clones the repository and
# runs `make demo`, then `make test`, as the first commands. The minbase root
# file system is built once with debootstrap (build/fresh/base, cached); every
# run copies it afresh (build/fresh/root), so `make deps` starts from nothing
# each time. The clone is of the commit checked out here (HEAD: uncommitted
# changes are not part of it). Root only; prints "skipped: needs root"
# otherwise. Every mount it makes is undone when it ends, also on failure or
# on an interrupt. Exits non-zero when `make demo` or `make test` fails inside.
# After them it follows the install routes of README.md and docs/PYTHON.md
# (tests/fresh/install_routes.sh). WSYNC_FRESH_ONLY=install skips demo and
# test (quicker, for working on the install; a full run is the default).
# WSYNC_FRESH_SUITE=noble does the same on Ubuntu 24.04. The archive mirror
# is the one this machine's apt uses for that suite (tests/fresh/apt_mirror.sh),
# or WSYNC_FRESH_MIRROR; with neither the run stops and says so.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${WSYNC_FRESH_DIR:-$ROOT/build/fresh}
LIMIT=${WSYNC_FRESH_TIMEOUT_S:-4800}
SUITE=${WSYNC_FRESH_SUITE:-bookworm}
BASE=$DIR/base-$SUITE R=$DIR/root-$SUITE

say() { echo "test-fresh: $*"; }
die() { echo "test-fresh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { say "skipped: needs root (debootstrap, chroot and mounts)"; exit 0; }
. "$ROOT/tests/fresh/apt_mirror.sh"
case $SUITE in
bookworm) NAME="Debian 12" ;;
noble) NAME="Ubuntu 24.04" ;;
*) die "WSYNC_FRESH_SUITE=$SUITE: bookworm (Debian 12) or noble (Ubuntu 24.04)" ;;
esac
MIRROR=${WSYNC_FRESH_MIRROR:-$(apt_mirror "$SUITE")}
[ -n "$MIRROR" ] || die "no archive mirror for $SUITE ($NAME): this machine's apt configuration" \
    "(${WSYNC_APT_ETC:-/etc/apt}/sources.list, sources.list.d/*.list, *.sources) has no deb entry for" \
    "suite $SUITE; set WSYNC_FRESH_MIRROR to the URL of a $NAME archive mirror you may use"
case ${WSYNC_FRESH_ONLY:-} in ''|install) ;; *) die "WSYNC_FRESH_ONLY=$WSYNC_FRESH_ONLY: install or unset" ;; esac
command -v debootstrap >/dev/null || die "debootstrap is not installed (as root: make deps DEPS_PKGS=debootstrap)"
command -v git >/dev/null || die "git is not installed"

# unmount_under DIR: every mount at DIR or below it, deepest first.
unmount_under() {
    local m
    awk -v d="$1" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r |
        while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
}
# kill_inside DIR: processes whose root is DIR (strays of the run inside).
kill_inside() {
    local p
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/root" 2>/dev/null)" = "$1" ] && kill -9 "${p#/proc/}" 2>/dev/null
    done
}
passed=0
cleanup() {
    kill_inside "$R"; unmount_under "$R"; unmount_under "$BASE"
    # A passed run's copy goes (GBs); a failed one stays to be looked into.
    [ "$passed" = 1 ] && ! grep -q " $R[ /]" /proc/mounts && rm -rf "$R"
}
trap cleanup EXIT
trap "exit 130" INT; trap "exit 143" TERM   # so the EXIT trap runs on a signal too

BOOTSTRAP=(--variant=minbase --include=git,make,ca-certificates) script=
if [ "$SUITE" = noble ]; then
    # Ubuntu 24.04: universe too (python3-torch); older debootstraps know
    # noble only as another gutsy-style suite.
    BOOTSTRAP+=(--components=main,universe)
    [ -f /usr/share/keyrings/ubuntu-archive-keyring.gpg ] || BOOTSTRAP+=(--no-check-gpg)
    script=/usr/share/debootstrap/scripts/noble
    [ -e "$script" ] || script=/usr/share/debootstrap/scripts/gutsy
fi

mkdir -p "$DIR"
t0=$(date +%s)
if [ ! -f "$BASE/.ready" ]; then
    unmount_under "$BASE"; rm -rf "$BASE"
    say "debootstrap ${BOOTSTRAP[*]} $SUITE from $MIRROR into $BASE (once; a few minutes)"
    debootstrap "${BOOTSTRAP[@]}" "$SUITE" "$BASE" "$MIRROR" ${script:+"$script"} \
        >"$DIR/debootstrap-$SUITE.log" 2>&1 ||
        { tail -20 "$DIR/debootstrap-$SUITE.log" >&2; die "debootstrap failed (log: $DIR/debootstrap-$SUITE.log)"; }
    unmount_under "$BASE"
    touch "$BASE/.ready"
else
    say "minbase root file system cached in $BASE"
fi

# This run's machine: a fresh copy of the base, the commit under test as a
# bare repository to clone from, the host's resolver, and no daemons started
# by package installs.
unmount_under "$R"; rm -rf "$R"
cp -a "$BASE" "$R" || die "cannot copy $BASE to $R"
commit=$(git -C "$ROOT" rev-parse HEAD) || die "$ROOT is not a git checkout"
[ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ] ||
    say "note: uncommitted changes in $ROOT are not tested (the clone is of $commit)"
git init -q --bare "$R/srv/wsync.git" && git -C "$R/srv/wsync.git" symbolic-ref HEAD refs/heads/main &&
    git -C "$ROOT" push -q "$R/srv/wsync.git" "$commit:refs/heads/main" ||
    die "cannot copy commit $commit into the root file system"
cp -L /etc/resolv.conf "$R/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"; chmod +x "$R/usr/sbin/policy-rc.d"
mkdir -p "$DIR/apt-archives-$SUITE/partial"   # downloaded packages are kept for the next run

# Mounts: / of the chroot is a mount point (network namespaces need that), and
# nothing propagates back to this machine's mounts.
mnt() { mount "$@" && mount --make-rprivate "${@: -1}"; }
if ! mnt --bind "$R" "$R" 2>"$DIR/mount-$SUITE.err"; then
    grep -qi 'permission denied\|not permitted' "$DIR/mount-$SUITE.err" &&
        { say "skipped: cannot mount here ($(head -1 "$DIR/mount-$SUITE.err"))"; exit 0; }
    die "cannot bind-mount $R onto itself: $(cat "$DIR/mount-$SUITE.err")"
fi
mnt -t proc proc "$R/proc" && mnt -t sysfs sysfs "$R/sys" && mnt --bind /dev "$R/dev" &&
    mnt --bind /dev/pts "$R/dev/pts" && mnt -t tmpfs -o mode=1777 shm "$R/dev/shm" &&
    mnt --bind "$DIR/apt-archives-$SUITE" "$R/var/cache/apt/archives" ||
    die "cannot mount the kernel file systems in $R"
t1=$(date +%s)
say "root file system ready in $((t1 - t0)) s; cloning $commit and running" \
    "${WSYNC_FRESH_ONLY:+(WSYNC_FRESH_ONLY=install) }$([ -z "${WSYNC_FRESH_ONLY:-}" ] && echo "make demo, make test, ")the install routes"

log=$DIR/run-$SUITE.log
timeout "$LIMIT" chroot "$R" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 ONLY="${WSYNC_FRESH_ONLY:-}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -c '
        set -e
        git clone -q /srv/wsync.git /root/wsync && cd /root/wsync
        echo "fresh: cloned $(git log -1 --format="%h %s")"
        if [ -z "$ONLY" ]; then
            s=$(date +%s); make demo; d=$(date +%s)
            echo "fresh: make demo took $((d - s)) s"
            make test; e=$(date +%s)
            echo "fresh: make test took $((e - d)) s"
        fi
        s=$(date +%s); bash tests/fresh/install_routes.sh; e=$(date +%s)
        echo "fresh: the install routes took $((e - s)) s"' </dev/null 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
t2=$(date +%s)
say "took $((t2 - t0)) s in all ($((t2 - t1)) s inside; log: $log)"
[ "$rc" = 124 ] && say "the run inside did not finish in $LIMIT s"
[ "$rc" != 0 ] && say "make demo / make test / the install routes failed inside the fresh root file system (exit $rc)"
# The last line: the inner suite's summary plus the install routes' PASS and
# FAIL lines (or one failure when nothing ran).
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
np=${summary%% passed*} nf=${summary##*, }; nf=${nf%% failed}
[ -n "$summary" ] || np=0 nf=0
np=$((np + $(grep -c '^PASS fresh_' "$log"))) nf=$((nf + $(grep -c '^FAIL fresh_' "$log")))
[ "$rc" != 0 ] && [ "$nf" = 0 ] && nf=1      # the tests passed, the run did not
echo "$np passed, $nf failed"
[ "$rc" = 0 ] && passed=1
[ "$rc" = 0 ]
