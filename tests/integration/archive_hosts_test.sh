#!/usr/bin/env bash
# archive_hosts_test.sh: no package archive is named in the repository (issue
# 25 item 14): the scripts that need a mirror take the one this machine's apt
# uses (tests/fresh/apt_mirror.sh) and stop with a clear message when there is
# none. Checks every tracked file for archive host names and archive URLs,
# apt_mirror on sample apt configurations (deb822 and one-line, disabled and
# security entries), and that `make test-fresh` for a suite with no mirror
# stops and says what to set.
source "$(dirname "$0")/lib.sh"

NAME=archive_hosts
cd "$WSYNC_ROOT" || exit 1
# Written so that this file does not match itself (the dots are escaped).
HOSTS='(deb|ftp[0-9]*\.[a-z]+|security|snapshot|archive)\.debian\.org|([a-z]+\.)?(archive|security|ports)\.ubuntu\.com'
HOSTS+='|ppa\.launchpad\.net|ppa\.launchpadcontent\.net|deb\.nodesource\.com|packages\.cloud\.google\.com'
HOSTS+='|download\.docker\.com|developer\.download\.nvidia\.com|(files\.|upload\.)?pythonhosted\.org|pypi\.org'
HOSTS+='|download\.pytorch\.org|repo\.anaconda\.com|conda\.anaconda\.org'
URLS='(https?|ftp)://[^[:space:]"'\''`)]*/(debian|ubuntu|debian-security|ubuntu-ports)/?([[:space:]"'\''`)]|$)'
if git rev-parse --git-dir >/dev/null 2>&1; then
    files() { git ls-files -z; }
else
    files() { find . -path ./build -prune -o -path ./.git -prune -o -type f -print0; }
fi
# Hosts under .invalid (reserved, RFC 2606) are the samples below, not archives.
hits=$(files | xargs -0 grep -I -n -i -E "$HOSTS|$URLS" 2>/dev/null | grep -v -E '://[a-z0-9.-]+\.invalid/' | head -20)
if [ -z "$hits" ]; then pass "$NAME"_none_in_repository; else
    fail "$NAME"_none_in_repository "$(echo "$hits" | wc -l) lines name a package archive (take the mirror from apt):" \
        "$(echo "$hits" | cut -c1-120 | tr '\n' ';')"
fi

# apt_mirror on sample configurations.
. tests/fresh/apt_mirror.sh
E=$TMP/apt
mkdir -p "$E/sources.list.d"
cat >"$E/sources.list.d/a.sources" <<'EOF'
Types: deb
URIs: http://mirror.invalid/debian-security
Suites: bookworm-security
Components: main

Types: deb-src
URIs: http://src.invalid/debian
Suites: bookworm

Types: deb
URIs: http://off.invalid/debian
Suites: bookworm
Enabled: no

Types: deb
# a comment inside the entry
URIs: http://mirror.invalid/debian http://second.invalid/debian
Suites: bookworm bookworm-updates
Components: main
EOF
echo 'deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://one.invalid/ubuntu noble main universe' \
    >"$E/sources.list"
echo '# deb http://commented.invalid/debian trixie main' >"$E/sources.list.d/b.list"
check "$NAME"_deb822 test "$(WSYNC_APT_ETC=$E apt_mirror bookworm)" = http://mirror.invalid/debian
check "$NAME"_one_line test "$(WSYNC_APT_ETC=$E apt_mirror noble)" = http://one.invalid/ubuntu
check "$NAME"_none_for_other_suite test -z "$(WSYNC_APT_ETC=$E apt_mirror trixie)"
check "$NAME"_none_without_config test -z "$(WSYNC_APT_ETC=$TMP/nothing apt_mirror bookworm)"

# test-fresh with no mirror for its suite: stops at once and says what to set
# (as root only: it skips before that otherwise).
if [ "$(id -u)" = 0 ]; then
    WSYNC_APT_ETC=$TMP/nothing WSYNC_FRESH_SUITE=noble WSYNC_FRESH_DIR=$TMP/fresh \
        bash tests/fresh/run.sh >"$TMP/fresh.out" 2>&1
    rc=$?
    check "$NAME"_fresh_stops_without_mirror test "$rc" != 0
    check "$NAME"_fresh_says_what_to_set grep -q 'no archive mirror for noble (Ubuntu 24.04).*set WSYNC_FRESH_MIRROR' \
        "$TMP/fresh.out"
    check "$NAME"_fresh_did_nothing test ! -e "$TMP/fresh"
else
    skip "$NAME"_fresh_stops_without_mirror "tests/fresh/run.sh skips before that as a user other than root"
fi
exit 0
