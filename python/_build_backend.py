"""_build_backend.py: a PEP 517 build backend in the standard library only, so
`pip install ./python` needs no network (pip's isolated build would otherwise
fetch setuptools). It builds one wheel: the wsync package plus libwsync.so,
so the installed package finds its library with no WSYNC_LIB (the wheel is
then tagged for this platform). The library is, in order: one placed in
python/wsync/ by hand, the file $WSYNC_LIB names, or the repository's own
build (`make` is run there first, in $WSYNC_BUILD or build/, so the library
is current). Without any (an sdist outside the repository) the wheel holds
the package alone, which then loads libwsync.so installed by `make install`."""
import base64
import hashlib
import os
import subprocess
import sys
import sysconfig
import zipfile

NAME, VERSION = "wsync", "0.1.0"
HERE = os.path.dirname(os.path.abspath(__file__))
METADATA = """Metadata-Version: 2.1
Name: wsync
Version: %s
Summary: Sync model weights from RL trainer ranks to inference engines (ctypes over libwsync.so)
Requires-Python: >=3.9
""" % VERSION


def _library():
    """The libwsync.so to carry, or None."""
    own = os.path.join(HERE, NAME, "libwsync.so")
    if os.path.exists(own):
        return own
    env = os.environ.get("WSYNC_LIB")
    if env:
        path = os.path.join(env, "libwsync.so") if os.path.isdir(env) else env
        if not os.path.isfile(path):
            raise RuntimeError("wsync: WSYNC_LIB=%s: no such library (unset it to build the repository's)" % env)
        return path
    repo = os.path.dirname(HERE)
    if not os.path.exists(os.path.join(repo, "Makefile")):
        return None
    build = os.environ.get("WSYNC_BUILD", "build")
    # make's output goes to stderr: pip shows it when the build fails.
    done = subprocess.run(["make", "-C", repo, "--no-print-directory", "BUILD=" + build, "all"],
                          stdout=sys.stderr, check=False)
    path = os.path.join(repo, build, "libwsync.so")
    if done.returncode != 0 or not os.path.exists(path):
        raise RuntimeError("wsync: `make` in %s failed (its output is above), so there is no libwsync.so to put "
                           "in the wheel: fix what it says (as root: make deps), then pip install again" % repo)
    return path


def _files(lib):
    pkg = os.path.join(HERE, NAME)
    for f in sorted(os.listdir(pkg)):
        if f.endswith(".py") and f != "_installed.py":
            yield os.path.join(pkg, f), "%s/%s" % (NAME, f)
    if lib:
        yield lib, "%s/libwsync.so" % NAME


def _tag(lib):
    if lib:
        return "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "py3-none-any"


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arc, digest, len(data))


def _write_wheel(wheel_directory, editable=False):
    lib = None if editable else _library()
    tag = _tag(lib)
    name = "%s-%s-%s.whl" % (NAME, VERSION, tag)
    info = "%s-%s.dist-info" % (NAME, VERSION)
    entries = []
    if editable:
        entries.append(("wsync_editable.pth", (HERE + "\n").encode()))
    else:
        for path, arc in _files(lib):
            with open(path, "rb") as f:
                entries.append((arc, f.read()))
    entries.append((info + "/METADATA", METADATA.encode()))
    entries.append((info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: wsync _build_backend\nRoot-Is-Purelib: %s\n"
                                      "Tag: %s\n" % ("true" if tag.endswith("any") else "false", tag)).encode()))
    record = [_record_line(a, d) for a, d in entries] + [info + "/RECORD,,"]
    entries.append((info + "/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries:
            z.writestr(arc, data)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, editable=True)


def build_sdist(sdist_directory, config_settings=None):
    import tarfile
    name = "%s-%s" % (NAME, VERSION)
    out = os.path.join(sdist_directory, name + ".tar.gz")
    with tarfile.open(out, "w:gz") as t:
        for f in ("pyproject.toml", "README.md", "_build_backend.py"):
            t.add(os.path.join(HERE, f), "%s/%s" % (name, f))
        for path, arc in _files(None):
            t.add(path, "%s/%s" % (name, arc))
        info = tarfile.TarInfo("%s/PKG-INFO" % name)
        data = METADATA.encode()
        info.size = len(data)
        import io
        t.addfile(info, io.BytesIO(data))
    return os.path.basename(out)
