# apt_mirror.sh (sourced, POSIX sh): apt_mirror SUITE prints the archive URI
# this machine's apt configuration uses for SUITE (bookworm, noble, ...): the
# first enabled "deb" entry whose suites name it exactly, from
# sources.list, sources.list.d/*.list (one-line format) or
# sources.list.d/*.sources (deb822); nothing when there is none. The test
# scripts take their mirror from here and never name an archive themselves.
# WSYNC_APT_ETC: the folder read instead of /etc/apt (tests).
apt_mirror() {
    _etc=${WSYNC_APT_ETC:-/etc/apt}
    set -- "$1" "$_etc/sources.list" "$_etc"/sources.list.d/*.list "$_etc"/sources.list.d/*.sources
    _suite=$1; shift
    for _f in "$@"; do [ -f "$_f" ] && printf '%s\n' "$_f"; done | while read -r _f; do
        awk -v suite="$_suite" -v deb822="$(case $_f in *.sources) echo 1 ;; esac)" '
            function hit(types, suites, uri) {
                return index(" " types " ", " deb ") && index(" " suites " ", " " suite " ") && uri != ""
            }
            function flush() {
                if (enabled != "no" && hit(types, suites, uri)) { print uri; exit }
                types = suites = uri = enabled = ""
            }
            /^[ \t]*#/ { next }
            deb822 && /^[ \t]*$/ { flush(); next }
            deb822 && /^[^ \t]/ {
                key = tolower($1); sub(/:.*/, "", key); val = $0; sub(/^[^:]*:[ \t]*/, "", val)
                if (key == "types") types = val
                else if (key == "suites") suites = val
                else if (key == "uris") { split(val, u, /[ \t]+/); uri = u[1] }
                else if (key == "enabled") enabled = tolower(val)
                next
            }
            !deb822 && $1 == "deb" {
                line = $0; gsub(/\[[^]]*\]/, "", line); split(line, w, /[ \t]+/)
                if (w[3] == suite) { print w[2]; exit }
            }
            END { if (deb822) flush() }' "$_f"
    done | head -1
}
