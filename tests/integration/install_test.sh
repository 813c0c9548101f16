#!/usr/bin/env bash
# install_test.sh: the install routes of README.md and docs/PYTHON.md, on this
# machine. `make install` into a user prefix (a HOME of its own: ~/.local),
# into a prefix Python does not search, and (as root, in a mount namespace
# with /usr/local and /etc overlaid, so nothing here changes) into the system
# prefix /usr/local: each gives a `wsync` (on PATH, or a note saying how), a C
# program built with `pkg-config --cflags --libs wsync` alone that runs with
# no LD_LIBRARY_PATH, `pkg-config --static` naming only libraries that exist,
# and the package that /usr/bin/python3 imports with its library found (no
# WSYNC_LIB). Then `pip install ./python` into a venv (offline) carrying its
# library, Debian's refusal of pip outside a venv, `make uninstall` leaving
# nothing, and DESTDIR staging. tests/fresh/run.sh runs the same routes on a
# fresh Debian 12.
source "$(dirname "$0")/lib.sh"

NAME=install
BUILD=${WSYNC_BUILD:-$WSYNC_ROOT/build}
PY=/usr/bin/python3
if ! command -v pkg-config >/dev/null; then skip "$NAME" "needs pkg-config (make deps)"; exit 0; fi
MKLOG=$TMP/make.log
mk() { make -C "$WSYNC_ROOT" --no-print-directory BUILD="$BUILD" "$@" >>"$MKLOG" 2>&1; }
unset WSYNC_LIB LD_LIBRARY_PATH PYTHONPATH
# A sanitizer build (make asan) needs its runtime in the program as well, and
# Python cannot load it without the sanitizer preloaded (tests skip that there).
SAN=() ASAN=
nm "$BUILD/libwsync.a" 2>/dev/null | grep -q ' U __asan_' && SAN=(-fsanitize=address,undefined) ASAN=1

cat >"$TMP/prog.c" <<'C'
#include <stdio.h>
#include <string.h>
#include "common/wsync.h"
#include "engine_side/wsync_receiver.h"
#include "trainer_side/wsync_publisher.h"
int main(int argc, char **argv) {
    const char *v = wsync_version();
    if (argc < 2)
        printf("%s\n", v);
    return argc > 1 && strcmp(v, argv[1]) == 0 ? 0 : 1;
}
C
# Which libwsync.so a python loads for `import wsync` (run from $TMP).
py_lib() { (cd "$TMP" && "$@" "$WSYNC_ROOT/tests/fresh/which_lib.py" 2>>"$TMP/py.err"); }
have_py=; [ -x "$PY" ] && [ -z "$ASAN" ] && have_py=1
[ -n "$have_py" ] && ! $PY -c 'import torch' 2>/dev/null &&
    skip "$NAME"_python_full_import "no torch for $PY (make deps installs python3-torch): the package's loader is checked alone"

# c_program ROUTE PKG_CONFIG_PATH LIBDIR: built with pkg-config only, runs
# without LD_LIBRARY_PATH, loads LIBDIR/libwsync.so; --static names only
# libraries there are, and libwsync.a links with the .pc's Libs.private.
c_program() {
    local r=$1 pcp=$2 libdir=$3 version flags static
    version=$(PKG_CONFIG_PATH=$pcp pkg-config --modversion wsync)
    check "$NAME"_"$r"_pc_version test "$version" = "$("$libdir/../bin/wsync" --version | awk '{ print $2; exit }')"
    flags=$(PKG_CONFIG_PATH=$pcp pkg-config --cflags --libs wsync)
    # shellcheck disable=SC2086
    if cc "${SAN[@]}" -o "$TMP/prog_$r" "$TMP/prog.c" $flags 2>"$TMP/cc.err"; then
        check "$NAME"_"$r"_runs_without_ld_library_path env -u LD_LIBRARY_PATH "$TMP/prog_$r" "$version"
        check "$NAME"_"$r"_loads_installed_lib sh -c "ldd '$TMP/prog_$r' | grep -q '=> $libdir/libwsync.so'"
    else
        fail "$NAME"_"$r"_builds "cc prog.c $flags: $(head -5 "$TMP/cc.err")"
    fi
    # --static: every library it names must be there (the link says which is not).
    static=$(PKG_CONFIG_PATH=$pcp pkg-config --static --libs wsync)
    # shellcheck disable=SC2086
    if cc "${SAN[@]}" -o "$TMP/prog_s_$r" "$TMP/prog.c" $flags $static 2>"$TMP/cc.err"; then
        check "$NAME"_"$r"_static_flags_link "$TMP/prog_s_$r" "$version"
    else
        fail "$NAME"_"$r"_static_flags_link "cc prog.c \$(pkg-config --static --cflags --libs wsync): $(grep -o 'cannot find -l[^ :]*' "$TMP/cc.err" | tr '\n' ' ')$(head -3 "$TMP/cc.err")"
    fi
    # libwsync.a itself, with the rest of what --static names.
    # shellcheck disable=SC2046,SC2086
    if cc "${SAN[@]}" -o "$TMP/prog_a_$r" "$TMP/prog.c" $(PKG_CONFIG_PATH=$pcp pkg-config --cflags wsync) \
        "$libdir/libwsync.a" $(echo " $static " | sed 's/ -lwsync / /') 2>"$TMP/cc.err"; then
        check "$NAME"_"$r"_static_runs "$TMP/prog_a_$r" "$version"
    else
        fail "$NAME"_"$r"_static_builds "cc prog.c libwsync.a + pkg-config --static: $(head -3 "$TMP/cc.err")"
    fi
}

# same NAME EXPECTED CMD...: the library path CMD's python prints is EXPECTED (not empty).
same() {
    local n=$1 want=$2 got; shift 2
    got=$(py_lib "$@")
    if [ -n "$want" ] && [ "$got" = "$want" ]; then pass "$n"; else
        fail "$n" "expected libwsync.so at '$want', python loads '$got' ($(tail -1 "$TMP/py.err" 2>/dev/null))"; fi
}

# --- a user prefix: PREFIX=$HOME/.local, with a HOME of this test's own -----
H=$TMP/home P=$TMP/home/.local
mkdir -p "$H"
HOME=$H PATH=/usr/bin:/bin check "$NAME"_user_files mk install-files PREFIX="$P"
for f in bin/wsync lib/libwsync.so lib/libwsync.a lib/pkgconfig/wsync.pc include/wsync/common/wsync.h \
         include/wsync/trainer_side/wsync_publisher.h include/wsync/engine_side/wsync_receiver.h; do
    [ -f "$P/$f" ] || fail "$NAME"_user_has_"$(basename "$f")" "make install PREFIX=$P did not install $f"
done
check "$NAME"_user_path_note grep -q "$P/bin is not on your PATH" "$TMP/make.log"
check "$NAME"_user_wsync_on_path env PATH="$P/bin:/usr/bin:/bin" sh -c 'wsync --version >/dev/null'
c_program user "$P/lib/pkgconfig" "$P/lib"
if [ -n "$have_py" ]; then
    same "$NAME"_user_python_finds_lib "$P/lib/libwsync.so" env HOME="$H" $PY
fi
HOME=$H check "$NAME"_user_uninstall mk uninstall PREFIX="$P"
left=$(find "$P" -type f -o -type l)
check "$NAME"_user_nothing_left test -z "$left"
[ -z "$left" ] || echo "left after make uninstall: $left" >&2

# --- a prefix python3 does not search: the note says how -------------------
O=$TMP/opt
check "$NAME"_other_files mk install-files PREFIX="$O"
if [ -n "$have_py" ]; then
    dir=$(find "$O/lib" -path '*-packages/wsync' -type d | head -1)
    check "$NAME"_other_python_note grep -q "does not search ${dir%/wsync}: import wsync with PYTHONPATH" "$TMP/make.log"
    same "$NAME"_other_python_finds_lib "$O/lib/libwsync.so" env PYTHONPATH="${dir%/wsync}" $PY
fi
check "$NAME"_other_uninstall mk uninstall PREFIX="$O"
check "$NAME"_other_nothing_left test -z "$(find "$O" -type f -o -type l)"

# --- the system prefix, /usr/local: ldconfig, no rpath ----------------------
system_route() {
    mount --make-rprivate / || return 1
    local d
    for d in usr/local etc; do
        mkdir -p "$TMP/ovl/$d/up" "$TMP/ovl/$d/work"
        mount -t overlay overlay -o "lowerdir=/$d,upperdir=$TMP/ovl/$d/up,workdir=$TMP/ovl/$d/work" "/$d" || return 1
    done
    echo "system: overlays mounted"
    MKLOG=$TMP/make-system.log
    export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin   # Debian's root PATH
    mk install-files || { echo "FAIL ${NAME}_system_files: make install-files failed"; return 0; }
    [ "$(command -v wsync)" = /usr/local/bin/wsync ] && echo "PASS ${NAME}_system_wsync_on_path" ||
        echo "FAIL ${NAME}_system_wsync_on_path: command -v wsync gives '$(command -v wsync)'"
    grep -q 'not on your PATH' "$MKLOG" && echo "FAIL ${NAME}_system_no_path_note: a note for /usr/local/bin" ||
        echo "PASS ${NAME}_system_no_path_note"
    grep -q -- '^Libs:.*-rpath' /usr/local/lib/pkgconfig/wsync.pc && echo "FAIL ${NAME}_system_no_rpath: rpath in the .pc" ||
        echo "PASS ${NAME}_system_no_rpath"
    c_program system "" /usr/local/lib
    if [ -n "$have_py" ]; then
        same "$NAME"_system_python_finds_lib /usr/local/lib/libwsync.so $PY
    fi
    mk uninstall && [ -z "$(find /usr/local -name '*wsync*' | head -1)" ] && echo "PASS ${NAME}_system_uninstall" ||
        echo "FAIL ${NAME}_system_uninstall: left $(find /usr/local -name '*wsync*' | head -3)"
}
if [ "$(id -u)" != 0 ]; then
    skip "$NAME"_system "needs root (a mount namespace with /usr/local and /etc overlaid)"
elif ! command -v unshare >/dev/null; then
    skip "$NAME"_system "needs unshare (util-linux)"
else
    export -f system_route c_program check pass fail skip mk py_lib same
    export NAME BUILD TMP PY WSYNC_ROOT have_py ASAN
    SAN_S=${SAN[*]:-} unshare -m bash -c 'SAN=($SAN_S); system_route' >"$TMP/system.out" 2>"$TMP/system.err"
    if grep -q '^system: overlays mounted' "$TMP/system.out"; then
        grep -E '^(PASS|FAIL|SKIP) ' "$TMP/system.out"
    else
        skip "$NAME"_system "cannot overlay /usr/local and /etc here: $(head -1 "$TMP/system.err")"
    fi
fi

# --- a venv: pip install ./python, offline, carries the library ------------
if [ -z "$have_py" ]; then
    skip "$NAME"_venv "needs $PY and a build without a sanitizer"
elif ! $PY -m venv --system-site-packages "$TMP/venv" >"$TMP/venv.log" 2>&1; then
    skip "$NAME"_venv "no venv for $PY (make deps installs python3-venv): $(tail -1 "$TMP/venv.log")"
else
    if WSYNC_BUILD=$BUILD "$TMP/venv/bin/pip" install --no-index "$WSYNC_ROOT/python" >"$TMP/pip.log" 2>&1; then
        pass "$NAME"_venv_pip_install
        lib=$(find "$TMP/venv/lib" -path '*-packages/wsync/libwsync.so' | head -1)
        check "$NAME"_venv_carries_lib test -n "$lib"
        same "$NAME"_venv_python_finds_lib "$lib" "$TMP/venv/bin/python"
    else
        fail "$NAME"_venv_pip_install "$(tail -n 5 "$TMP/pip.log" | tr '\n' ' ')"
    fi
fi
# Debian's python3 refuses pip outside a venv (what docs/PYTHON.md says);
# --dry-run: where it would not refuse, nothing is installed.
if ls /usr/lib/python3*/EXTERNALLY-MANAGED >/dev/null 2>&1 && $PY -m pip --version >/dev/null 2>&1; then
    $PY -m pip install --dry-run --no-index "$WSYNC_ROOT/python" >"$TMP/pip-sys.log" 2>&1
    check "$NAME"_system_pip_refused grep -q externally-managed-environment "$TMP/pip-sys.log"
fi

# --- DESTDIR stages the files; the .pc names the final prefix ---------------
S=$TMP/stage
check "$NAME"_destdir mk install-files DESTDIR="$S" PREFIX=/opt/wsync
check "$NAME"_destdir_pc_prefix grep -qx 'prefix=/opt/wsync' "$S/opt/wsync/lib/pkgconfig/wsync.pc"
check "$NAME"_destdir_uninstall mk uninstall DESTDIR="$S" PREFIX=/opt/wsync
check "$NAME"_destdir_nothing_left test -z "$(find "$S" -type f -o -type l)"
exit 0
