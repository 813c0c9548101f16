"""_build_backend.py: a PEP 517 build backend in the standard library only, so
`pip install ./python` needs no network (pip's isolated build would otherwise
fetch setuptools). It builds one wheel: the wsync package, plus libwsync.so
when one sits next to it (then the wheel is tagged for this platform)."""
import base64
import hashlib
import os
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


def _files():
    pkg = os.path.join(HERE, NAME)
    for f in sorted(os.listdir(pkg)):
        if f.endswith(".py") or f == "libwsync.so":
            yield os.path.join(pkg, f), "%s/%s" % (NAME, f)


def _tag():
    if os.path.exists(os.path.join(HERE, NAME, "libwsync.so")):
        return "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "py3-none-any"


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arc, digest, len(data))


def _write_wheel(wheel_directory, editable=False):
    tag = _tag()
    name = "%s-%s-%s.whl" % (NAME, VERSION, tag)
    info = "%s-%s.dist-info" % (NAME, VERSION)
    entries = []
    if editable:
        entries.append(("wsync_editable.pth", (HERE + "\n").encode()))
    else:
        for path, arc in _files():
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
        for path, arc in _files():
            t.add(path, "%s/%s" % (name, arc))
        info = tarfile.TarInfo("%s/PKG-INFO" % name)
        data = METADATA.encode()
        info.size = len(data)
        import io
        t.addfile(info, io.BytesIO(data))
    return os.path.basename(out)
