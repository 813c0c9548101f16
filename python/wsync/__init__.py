"""wsync: sync model weights from RL trainer ranks to inference engines.

A thin layer over libwsync.so (ctypes): wsync.Publisher on each trainer rank
publishes torch tensors; wsync.Receiver on each local rank of an engine node
pulls verified versions, into the engine's tensors or as views over wsync's
memory; wsync.hf does both for transformers models. See docs/PYTHON.md.
"""
from . import _lib
from ._lib import Error, TimeoutError, last_error  # noqa: A004
from .publisher import Publisher, pack
from .receiver import Receiver
from .shard import dtensor_available, shard_state_dict

__all__ = ["Error", "TimeoutError", "Publisher", "Receiver", "pack", "shard_state_dict", "dtensor_available",
           "last_error", "version", "backends", "set_log_level", "library_path"]

library_path = _lib.path


def version():
    """libwsync's version string, e.g. "0.1.0"."""
    return _lib.lib.wsync_version().decode()


def backends():
    """The backends libwsync was built with, e.g. ["host", "tcp", "shm", "cuda"]."""
    return _lib.lib.wsync_backends().decode().split()


_LEVELS = {"error": 0, "warn": 1, "info": 2, "debug": 3}


def set_log_level(level):
    """C library messages at or below `level` ("error", "warn", "info", "debug") go to stderr."""
    if level not in _LEVELS:
        raise Error(_lib.WSYNC_ERR_INVALID, "log level %r: use one of %s" % (level, ", ".join(_LEVELS)))
    _lib.lib.wsync_log_set_level(_LEVELS[level])
