#!/usr/bin/env bash
# install_routes.sh: run by tests/fresh/run.sh inside the fresh system, as
# root, in the clone: the install routes of README.md and docs/PYTHON.md as a
# reader types them. `make install` (the system prefix /usr/local); as a
# user of its own, `make install PREFIX=$HOME/.local` and a venv with
# `pip install ./python`. Each gives what the docs promise: `wsync` on PATH
# (for ~/.local/bin from the next login on, by Debian's ~/.profile), a C
# program built with pkg-config alone that runs with no LD_LIBRARY_PATH, and
# `import wsync` from /usr/bin/python3 finding its library with no WSYNC_LIB.
# Prints PASS/FAIL lines named fresh_*; exits non-zero when one failed.
set -u
cd "$(dirname "$0")/../.." || exit 1
REPO=$PWD
failed=0
pass() { echo "PASS fresh_$1"; }
fail() { echo "FAIL fresh_$1: $2"; failed=1; }
check() { local n=$1; shift; if "$@"; then pass "$n"; else fail "$n" "'$*' failed"; fi; }
cat >/tmp/prog.c <<'C'
#include <stdio.h>
#include "common/wsync.h"
int main(void) {
    printf("libwsync %s\n", wsync_version());
    return 0;
}
C

# python3 and its venv come with `make deps` (make test ran it); a run of
# the install routes alone installs just them.
command -v python3 >/dev/null && python3 -m venv --help >/dev/null 2>&1 ||
    make deps DEPS_PKGS="python3 python3-venv" >/tmp/deps.log 2>&1 || fail deps "$(tail -3 /tmp/deps.log)"
python3 -c 'import torch' 2>/dev/null || echo "fresh: no torch here: the package's library loader is checked alone"

# --- make install, as root: /usr/local ---------------------------------------
echo "fresh: make install"
if make install >/tmp/install.log 2>&1; then
    pass system_make_install
    check system_wsync_on_path test "$(command -v wsync)" = /usr/local/bin/wsync
    check system_wsync_runs sh -c 'wsync --version >/dev/null'
    # shellcheck disable=SC2046
    if (cd /tmp && cc -o prog prog.c $(pkg-config --cflags --libs wsync)) 2>/tmp/cc.log; then
        check system_c_program_runs sh -c 'env -i /tmp/prog >/dev/null'
    else
        fail system_c_program_builds "$(head -3 /tmp/cc.log)"
    fi
    check system_python_finds_lib test "$(cd / && python3 "$REPO/tests/fresh/which_lib.py")" = /usr/local/lib/libwsync.so
    check system_make_uninstall sh -c 'make uninstall >>/tmp/install.log 2>&1'
    check system_python_gone sh -c 'cd / && python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec(\"wsync\") is not None)"'
else
    fail system_make_install "$(tail -5 /tmp/install.log)"
fi

# --- a user of its own: ~/.local and a venv ----------------------------------
id wsyncuser >/dev/null 2>&1 || useradd -m -s /bin/bash wsyncuser || fail user "useradd failed"
rm -rf /home/wsyncuser/wsync && cp -a "$REPO" /home/wsyncuser/wsync && chown -R wsyncuser: /home/wsyncuser/wsync
cp /tmp/prog.c /home/wsyncuser/prog.c && chown wsyncuser: /home/wsyncuser/prog.c
cp "$REPO/tests/fresh/which_lib.py" /home/wsyncuser/which_lib.py
# as_user CMD: a login shell of the user (its ~/.profile read), no other environment.
as_user() { (cd / && runuser -u wsyncuser -- env -i HOME=/home/wsyncuser USER=wsyncuser LOGNAME=wsyncuser \
    SHELL=/bin/bash TERM=dumb LANG=C.UTF-8 PATH=/usr/bin:/bin bash -lc "cd && $1"); }

echo "fresh: make install PREFIX=\$HOME/.local"
if as_user 'cd ~/wsync && make install PREFIX="$HOME/.local"' >/tmp/user-install.log 2>&1; then
    pass user_make_install
    check user_path_note grep -q '.local/bin is not on your PATH' /tmp/user-install.log
    check user_wsync_on_path_next_login test "$(as_user 'command -v wsync')" = /home/wsyncuser/.local/bin/wsync
    check user_c_program_runs as_user 'export PKG_CONFIG_PATH="$HOME/.local/lib/pkgconfig"
        cc -o prog prog.c $(pkg-config --cflags --libs wsync) && env -i ./prog >/dev/null'
    check user_python_finds_lib test "$(as_user 'python3 which_lib.py')" = /home/wsyncuser/.local/lib/libwsync.so
    check user_make_uninstall as_user 'cd ~/wsync && make uninstall PREFIX="$HOME/.local" >/dev/null'
else
    fail user_make_install "$(tail -5 /tmp/user-install.log)"
fi

echo "fresh: pip install ./python in a venv"
if as_user 'python3 -m venv --system-site-packages ~/venv && cd ~/wsync && ~/venv/bin/pip install --no-index ./python' \
    >/tmp/venv.log 2>&1; then
    pass venv_pip_install
    lib=$(as_user 'ls ~/venv/lib/python3*/site-packages/wsync/libwsync.so')
    check venv_carries_lib test -n "$lib"
    check venv_python_finds_lib test "$(as_user '~/venv/bin/python which_lib.py')" = "$lib"
else
    fail venv_pip_install "$(tail -5 /tmp/venv.log)"
fi
exit $failed
