"""which_lib.py: prints the libwsync.so that `import wsync` loads in this
python, run from outside the repository. Without torch (Debian's
python3-torch) the package itself cannot be imported; then its loader
(wsync._lib) is imported alone, which is what finds the library."""
import importlib.util
import sys
import types

spec = importlib.util.find_spec("wsync")
if spec is None:
    sys.exit("wsync is not importable: sys.path is %s" % sys.path)
try:
    import torch  # noqa: F401
except ImportError:
    pkg = types.ModuleType("wsync")
    pkg.__path__ = list(spec.submodule_search_locations)
    sys.modules["wsync"] = pkg
    from wsync import _lib
    print(_lib.path)
else:
    import wsync
    print(wsync.library_path)
