"""_install_dir.py PREFIX: where `make install PREFIX=...` puts the wsync
package so that this python3 imports it, printed as "DIR KIND": KIND "user"
when PREFIX is this python's user base (~/.local: its user site directory),
"site" when one of its site directories lies under PREFIX (/usr/local on
Debian: /usr/local/lib/python3.X/dist-packages), "other" otherwise
(PREFIX/lib/python3.X/site-packages, which it does not search)."""
import os
import site
import sys

prefix = sys.argv[1]
real = os.path.realpath(prefix)
if site.ENABLE_USER_SITE and os.path.realpath(site.getuserbase()) == real:
    print(site.getusersitepackages(), "user")
    sys.exit(0)
for d in site.getsitepackages():  # PREFIX/lib...: /usr/local/lib/... is not /usr's
    if os.path.relpath(os.path.realpath(d), real).split(os.sep)[0] in ("lib", "lib64"):
        print(d, "site")
        sys.exit(0)
print("%s/lib/python%d.%d/site-packages" % ((prefix,) + sys.version_info[:2]), "other")
