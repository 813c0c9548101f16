#!/usr/bin/env bash
# install_test.sh: `make install` into a temporary prefix (and into a staging
# DESTDIR), then a small C program built against it with pkg-config only
# (shared, and static with wsync.pc's private fields), run; then `make
# uninstall` leaves no file behind.
source "$(dirname "$0")/lib.sh"

NAME=install
BUILD=${WSYNC_BUILD:-$WSYNC_ROOT/build}
if ! command -v pkg-config >/dev/null; then skip "$NAME" "needs pkg-config (make deps)"; exit 0; fi
mk() { make -C "$WSYNC_ROOT" --no-print-directory BUILD="$BUILD" "$@" >>"$TMP/make.log" 2>&1; }
P=$TMP/prefix

check "$NAME"_files mk install-files PREFIX="$P"
for f in bin/wsync lib/libwsync.so lib/libwsync.a lib/pkgconfig/wsync.pc include/wsync/common/wsync.h \
         include/wsync/trainer_side/wsync_publisher.h include/wsync/engine_side/wsync_receiver.h; do
    [ -f "$P/$f" ] || fail "$NAME"_has_"$(basename "$f")" "make install PREFIX=$P did not install $f"
done
export PKG_CONFIG_PATH=$P/lib/pkgconfig
check "$NAME"_pc_version test "$(pkg-config --modversion wsync)" = "$("$P/bin/wsync" --version | awk '{ print $2; exit }')"

# The program: every public header by its documented include line, and the
# version string printed by the library must be the .pc's.
cat >"$TMP/prog.c" <<'C'
#include <stdio.h>
#include <string.h>
#include "common/wsync.h"
#include "engine_side/wsync_receiver.h"
#include "trainer_side/wsync_publisher.h"
int main(int argc, char **argv) {
    const char *v = wsync_version();
    printf("%s\n", v);
    return argc > 1 && strcmp(v, argv[1]) == 0 ? 0 : 1;
}
C
version=$(pkg-config --modversion wsync)
# A sanitizer build (make asan) needs its runtime in the program as well.
SAN=()
nm "$BUILD/libwsync.a" 2>/dev/null | grep -q ' U __asan_' && SAN=(-fsanitize=address,undefined)
# shellcheck disable=SC2046
if cc "${SAN[@]}" -o "$TMP/prog" "$TMP/prog.c" $(pkg-config --cflags --libs wsync) 2>"$TMP/cc.err"; then
    check "$NAME"_shared_runs env LD_LIBRARY_PATH="$P/lib" "$TMP/prog" "$version"
    check "$NAME"_shared_links_installed_lib \
        sh -c "LD_LIBRARY_PATH='$P/lib' ldd '$TMP/prog' | grep -q '$P/lib/libwsync.so'"
else
    fail "$NAME"_shared_builds "cc prog.c \$(pkg-config --cflags --libs wsync): $(head -5 "$TMP/cc.err")"
fi
# Static: libwsync.a plus what wsync.pc says it needs (its Requires.private
# modules and Libs.private), so a missing entry there fails the link.
req=$(sed -n 's/^Requires.private: *//p' "$P/lib/pkgconfig/wsync.pc")
priv=$(sed -n 's/^Libs.private: *//p' "$P/lib/pkgconfig/wsync.pc")
# shellcheck disable=SC2046,SC2086
if cc "${SAN[@]}" -o "$TMP/prog_static" "$TMP/prog.c" $(pkg-config --cflags wsync) "$P/lib/libwsync.a" \
        $(pkg-config --libs $req) $priv 2>"$TMP/cc.err"; then
    check "$NAME"_static_runs "$TMP/prog_static" "$version"
else
    fail "$NAME"_static_builds "cc prog.c libwsync.a + Requires.private/Libs.private: $(head -5 "$TMP/cc.err")"
fi
if [ -d "$WSYNC_ROOT/python/wsync" ]; then
    check "$NAME"_python test -n "$(find "$P/lib" -path '*-packages/wsync/*.py' | head -1)"
fi

check "$NAME"_uninstall mk uninstall PREFIX="$P"
left=$(find "$P" -type f -o -type l)
check "$NAME"_nothing_left test -z "$left"
[ -z "$left" ] || echo "left after make uninstall: $left" >&2

# DESTDIR stages the files; the .pc names the final prefix.
S=$TMP/stage
check "$NAME"_destdir mk install-files DESTDIR="$S" PREFIX=/opt/wsync
check "$NAME"_destdir_pc_prefix grep -qx 'prefix=/opt/wsync' "$S/opt/wsync/lib/pkgconfig/wsync.pc"
check "$NAME"_destdir_uninstall mk uninstall DESTDIR="$S" PREFIX=/opt/wsync
check "$NAME"_destdir_nothing_left test -z "$(find "$S" -type f -o -type l)"
exit 0
