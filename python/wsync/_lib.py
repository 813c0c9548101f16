"""_lib.py: loads libwsync.so and declares its public C API for ctypes.

The structures here mirror common/wsync.h, trainer_side/wsync_publisher.h and
engine_side/wsync_receiver.h field for field; tests/python/abi_test.py compiles
a C program against those headers and checks every offset and size, so a field
added in C without its twin here fails the test suite instead of a training
run.
"""
import ctypes
import os

_STATUS_NAMES = {
    0: "WSYNC_OK", -1: "WSYNC_ERR_INVALID", -2: "WSYNC_ERR_NOMEM", -3: "WSYNC_ERR_IO",
    -4: "WSYNC_ERR_FORMAT", -5: "WSYNC_ERR_NOT_FOUND", -6: "WSYNC_ERR_TIMEOUT",
    -7: "WSYNC_ERR_PEER", -8: "WSYNC_ERR_DIGEST", -9: "WSYNC_ERR_CONFLICT",
    -10: "WSYNC_ERR_UNSUPPORTED", -11: "WSYNC_ERR_HTTP", -12: "WSYNC_ERR_CUDA",
    -13: "WSYNC_ERR_NCCL", -14: "WSYNC_ERR_VERBS", -15: "WSYNC_ERR_CANCELLED",
    -16: "WSYNC_ERR_AUTH", -17: "WSYNC_ERR_INTERNAL",
}
for _code, _name in _STATUS_NAMES.items():
    globals()[_name] = _code

MAX_DIMS = 8


class Error(Exception):
    """A wsync failure: `status` (the C status code, e.g. -6), `status_name`
    ("WSYNC_ERR_TIMEOUT"), `reason` (the C library's short name, "timeout")
    and `detail` (wsync_last_error(): what failed, which tensor, peer or
    file)."""

    def __init__(self, status, detail, reason=None):
        self.status = int(status)
        self.status_name = _STATUS_NAMES.get(self.status, "WSYNC_ERR_%d" % -self.status)
        self.reason = reason if reason is not None else _status_str(self.status)
        self.detail = detail
        super().__init__("%s (%s): %s" % (self.status_name, self.reason, detail))


class TimeoutError(Error):  # noqa: A001 - the name the API promises
    """A deadline passed (WSYNC_ERR_TIMEOUT)."""


def make_error(status, detail, reason=None):
    cls = TimeoutError if status == WSYNC_ERR_TIMEOUT else Error  # noqa: F821 (set above)
    return cls(status, detail, reason)


class TensorInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_char_p),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("offset", ctypes.c_uint64),
        ("size", ctypes.c_uint64),
    ]


class Owned(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_uint64), ("len", ctypes.c_uint64), ("ptr", ctypes.c_void_p)]


class PublisherConfig(ctypes.Structure):
    _fields_ = [
        ("control_url", ctypes.c_char_p),
        ("token", ctypes.c_char_p),
        ("rank", ctypes.c_int),
        ("world", ctypes.c_int),
        ("manifest_json", ctypes.c_char_p),
        ("layout", ctypes.c_int),
        ("chunk_size", ctypes.c_uint64),
        ("image", ctypes.c_void_p),
        ("owned", ctypes.POINTER(Owned)),
        ("nowned", ctypes.c_int),
        ("device", ctypes.c_char_p),
        ("zero_copy", ctypes.c_int),
        ("listen", ctypes.c_char_p),
        ("advertise_host", ctypes.c_char_p),
        ("host_id", ctypes.c_char_p),
        ("slot_wait_ms", ctypes.c_int),
        ("serve", ctypes.c_char_p),
        ("serve_state", ctypes.c_char_p),
        ("threads", ctypes.c_int),
    ]


class PublishOpts(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint)]


WSYNC_PUBLISH_SINGLE_COPY = 1
WSYNC_PUBLISH_SLOT = 2


class DestTensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("ptr", ctypes.c_void_p), ("nbytes", ctypes.c_uint64)]


class ReceiverConfig(ctypes.Structure):
    _fields_ = [
        ("control_url", ctypes.c_char_p),
        ("token", ctypes.c_char_p),
        ("engine_id", ctypes.c_char_p),
        ("local_rank", ctypes.c_int),
        ("local_world", ctypes.c_int),
        ("device", ctypes.c_char_p),
        ("mode", ctypes.c_int),
        ("transport", ctypes.c_char_p),
        ("bind_host", ctypes.c_char_p),
        ("host_id", ctypes.c_char_p),
        ("image", ctypes.c_void_p),
        ("image_len", ctypes.c_size_t),
        ("target_json", ctypes.c_char_p),
        ("tp_size", ctypes.c_int),
        ("rules_json", ctypes.c_char_p),
        ("dests", ctypes.POINTER(DestTensor)),
        ("ndests", ctypes.c_int),
        ("check_dests", ctypes.c_void_p),  # a CHECK_DESTS callback (kept alive by its Receiver)
        ("check_dests_arg", ctypes.c_void_p),
        ("cancel", ctypes.POINTER(ctypes.c_int)),  # stops wsync_receiver_create's waits once nonzero
    ]


class PullProgress(ctypes.Structure):
    """wsync_pull_progress_t (engine_side/wsync_receiver.h)."""
    _fields_ = [
        ("phase", ctypes.c_char_p),
        ("version", ctypes.c_uint64),
        ("done", ctypes.c_uint64),
        ("total", ctypes.c_uint64),
        ("elapsed_s", ctypes.c_double),
        ("last_setup_s", ctypes.c_double),
    ]


class PullDeltaStats(ctypes.Structure):
    """wsync_pull_delta_stats_t (engine_side/wsync_receiver.h)."""
    _fields_ = [
        ("version", ctypes.c_uint64),
        ("pieces", ctypes.c_uint64),
        ("wire_bytes", ctypes.c_uint64),
        ("piece_bytes", ctypes.c_uint64),
        ("refetched", ctypes.c_uint64),
    ]


# wsync_status_t (*check_dests)(void *arg, const wsync_tensor_info_t *tensors, size_t n)
CHECK_DESTS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(TensorInfo), ctypes.c_size_t)


LAYOUT_EVEN, LAYOUT_FSDP = 0, 1
MODE_STAGED, MODE_IN_PLACE = 0, 1

# name: (restype, argtypes)
_PROTOTYPES = {
    "wsync_status_str": (ctypes.c_char_p, [ctypes.c_int]),
    "wsync_last_error": (ctypes.c_char_p, []),
    "wsync_version": (ctypes.c_char_p, []),
    "wsync_backends": (ctypes.c_char_p, []),
    "wsync_log_set_level": (None, [ctypes.c_int]),
    "wsync_publisher_create": (ctypes.c_int, [ctypes.POINTER(PublisherConfig), ctypes.POINTER(ctypes.c_void_p)]),
    "wsync_publisher_publish": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint64]),
    "wsync_publisher_publish_opts": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(PublishOpts)]),
    "wsync_publisher_wait_held": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int]),
    "wsync_publisher_control_url": (ctypes.c_char_p, [ctypes.c_void_p]),
    "wsync_publisher_owned_bytes": (ctypes.c_uint64, [ctypes.c_void_p]),
    "wsync_publisher_destroy": (None, [ctypes.c_void_p]),
    "wsync_publisher_owned_extents": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                                     ctypes.POINTER(Owned), ctypes.c_int,
                                                     ctypes.POINTER(ctypes.c_int)]),
    "wsync_receiver_create": (ctypes.c_int, [ctypes.POINTER(ReceiverConfig), ctypes.POINTER(ctypes.c_void_p)]),
    "wsync_receiver_pull": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int,
                                           ctypes.POINTER(ctypes.c_uint64)]),
    "wsync_receiver_version": (ctypes.c_uint64, [ctypes.c_void_p]),
    "wsync_receiver_layout_generation": (ctypes.c_uint64, [ctypes.c_void_p]),
    "wsync_receiver_tensor_count": (ctypes.c_size_t, [ctypes.c_void_p]),
    "wsync_receiver_tensor_at": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p),
                                                ctypes.POINTER(TensorInfo)]),
    "wsync_receiver_tensor": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
                                             ctypes.POINTER(TensorInfo)]),
    "wsync_receiver_image": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                            ctypes.POINTER(ctypes.c_size_t)]),
    "wsync_receiver_progress": (None, [ctypes.c_void_p, ctypes.POINTER(PullProgress)]),
    "wsync_receiver_last_delta": (None, [ctypes.c_void_p, ctypes.POINTER(PullDeltaStats)]),
    "wsync_receiver_cancel": (None, [ctypes.c_void_p]),
    "wsync_receiver_cancel_clear": (None, [ctypes.c_void_p]),
    "wsync_receiver_destroy": (None, [ctypes.c_void_p]),
    "wsync_image_alloc": (ctypes.c_void_p, [ctypes.c_size_t]),
    "wsync_image_free": (None, [ctypes.c_void_p, ctypes.c_size_t]),
}


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    # A wheel built by `pip install ./python` carries the library here.
    yield os.path.join(here, "libwsync.so")
    env = os.environ.get("WSYNC_LIB")
    if env:
        yield os.path.join(env, "libwsync.so") if os.path.isdir(env) else env
    try:  # `make install` writes where it put the library (its LIBDIR)
        from . import _installed
        yield os.path.join(_installed.LIBDIR, "libwsync.so")
    except ImportError:
        pass
    yield os.path.join(os.path.dirname(os.path.dirname(here)), "build", "libwsync.so")  # the repository's build
    # PREFIX/lib/python3.X/{site,dist}-packages/wsync -> PREFIX/lib (a copy without _installed.py)
    yield os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(here))), "libwsync.so")
    yield "libwsync.so"  # the dynamic linker's own search (ldconfig, LD_LIBRARY_PATH)


def _load():
    tried = []
    for path in _candidates():
        if path in tried:
            continue
        tried.append(path)
        if os.path.isabs(path) and not os.path.exists(path):
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            if os.path.isabs(path):
                raise
            continue
        for name, (res, args) in _PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        return lib, path
    raise ImportError("wsync: libwsync.so not found; looked at %s. Build it with `make` in the repository, "
                      "then `make install` or `pip install ./python` (in a venv), or set WSYNC_LIB to the "
                      "library's path." % ", ".join(tried))


lib, path = _load()


def _status_str(status):
    s = lib.wsync_status_str(int(status))
    return s.decode() if s else "unknown status"


def last_error():
    """wsync_last_error() of the calling thread ("" if none)."""
    s = lib.wsync_last_error()
    return s.decode(errors="replace") if s else ""


def check(status, what, detail=None):
    """Raise the Error for a failed C call; `what` says what was being done;
    `detail`: the failing thread's last_error() (default: this thread's)."""
    if status != 0:
        detail = (detail if detail is not None else last_error()) or what
        raise make_error(status, "%s: %s" % (what, detail) if detail != what else what)


def cstr(s):
    return None if s is None else str(s).encode()
