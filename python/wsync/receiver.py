"""receiver.py: wsync.Receiver, one local rank of an engine node.

Without `into`, tensors() are views over the receiver's own image (no copy):
in mode "in-place" the image never moves, so an engine can make those views
its tensors and every pull lands in them (wsync.hf does this with a model's
parameters). With `into` (the engine's own tensors), a pull lands in wsync's
image(s) and, once the whole version verified, is copied into `into`, each
tensor checked against the manifest first: the contract of the C receiver's
`dests`, done here so that a dtype or shape mismatch is refused before
anything is written (the C side checks byte counts only, and only for ranks
with a target).
"""
import json
import ctypes
from collections.abc import Mapping

import torch

from . import _lib
from ._torch import bytes_at, device_string, invalid, sync, torch_dtype, typed_view
from .publisher import check_tensors

_MODES = {"staged": _lib.MODE_STAGED, "in-place": _lib.MODE_IN_PLACE}


def _json_text(doc):
    if doc is None or isinstance(doc, str):
        return doc
    if isinstance(doc, bytes):
        return doc.decode()
    return json.dumps(doc)


class Receiver:
    """Local rank `local_rank` of engine node `engine` (every local rank of
    the node creates one and calls pull() together). tp=T: this rank holds
    TP rank local_rank % T's slices, as vLLM lays them out (qkv_proj and
    gate_up_proj fused and split by rows, o_proj and down_proj by columns,
    the vocabulary padded to 64 and split), or as `rules` (JSON text or dict)
    say; target= gives an explicit target instead. tensors() then returns
    the destination tensors under their destination names."""

    def __init__(self, control, engine, local_rank, local_world, *, into=None, tp=None, mode="staged",
                 device=None, token=None, transport=None, bind_host=None, host_id=None, rules=None,
                 target=None):
        self._r = None
        if mode not in _MODES:
            raise invalid("mode=%r: use \"staged\" or \"in-place\"" % (mode,))
        if tp is not None and (not isinstance(tp, int) or tp < 1):
            raise invalid("tp=%r must be a positive integer (the engine's tensor-parallel size) or None" % (tp,))
        if target is not None and tp not in (None, 1):
            raise invalid("give tp= (the rules' slices) or target= (an explicit target), not both")
        if rules is not None and tp in (None, 1):
            raise invalid("rules= says how tp= slices tensors; it needs tp > 1")
        if not isinstance(local_world, int) or not isinstance(local_rank, int) or local_world < 1 \
                or not 0 <= local_rank < local_world:
            raise invalid("local_rank %r must be in [0, local_world %r)" % (local_rank, local_world))
        if not engine:
            raise invalid("engine= names the engine node (its local ranks share it); it is required")
        if into is not None:
            if not isinstance(into, Mapping):
                raise invalid("into= must map destination names to the engine's tensors (e.g. model.state_dict())")
            self._dev = check_tensors(into, device, "into")
            self._into = {n: t.detach() for n, t in into.items()}
        else:
            self._dev = device_string(device)
            self._into = None
        self.engine, self.local_rank, self.local_world, self.mode = engine, local_rank, local_world, mode
        self._views, self._views_key = None, None
        self._cache, self._bases, self._last, self.views_generation = {}, {}, None, 0
        cfg = _lib.ReceiverConfig()
        cfg.control_url = _lib.cstr(control)
        cfg.token = _lib.cstr(token)
        cfg.engine_id = _lib.cstr(engine)
        cfg.local_rank, cfg.local_world = local_rank, local_world
        cfg.device = self._dev.encode()
        cfg.mode = _MODES[mode]
        cfg.transport = _lib.cstr(transport)
        cfg.bind_host = _lib.cstr(bind_host)
        cfg.host_id = _lib.cstr(host_id)
        self.tp = tp if tp and tp > 1 else None
        cfg.tp_size = self.tp or 0
        cfg.rules_json = _lib.cstr(_json_text(rules))
        cfg.target_json = _lib.cstr(_json_text(target))
        self._cfg = cfg
        r = ctypes.c_void_p()
        _lib.check(_lib.lib.wsync_receiver_create(ctypes.byref(cfg), ctypes.byref(r)),
                   "engine %s rank %d: creating the receiver" % (engine, local_rank))
        self._r = r

    def _live(self):
        if self._r is None:
            raise _lib.Error(_lib.WSYNC_ERR_INVALID, "this receiver is closed")

    @property
    def version(self):
        """The version held (0 before the first pull)."""
        self._live()
        return _lib.lib.wsync_receiver_version(self._r)

    @property
    def device(self):
        return self._dev

    def pull(self, version=None, timeout=60.0):
        """Bring the node to `version` (None: the newest published version newer
        than the one held, waiting up to `timeout` seconds for one). Returns the
        version now held, verified on every local rank. Raises wsync.Error
        (wsync.TimeoutError on a timeout); in mode "staged" the held version,
        and `into`, stay as they were."""
        self._live()
        if version is not None and (not isinstance(version, int) or version < 1):
            raise invalid("version=%r must be a positive integer or None (the newest)" % (version,))
        if timeout is None or timeout < 0:
            raise invalid("timeout=%r must be a number of seconds >= 0" % (timeout,))
        got = ctypes.c_uint64(0)
        ms = int(min(timeout * 1000.0, 2**31 - 1))
        _lib.check(_lib.lib.wsync_receiver_pull(self._r, version or 0, ms, ctypes.byref(got)),
                   "engine %s rank %d: pull of %s" % (self.engine, self.local_rank,
                                                      "version %d" % version if version else "the newest version"))
        self._views = None
        if self._into is not None:
            self._copy_into()
        return got.value

    def _held_views(self):
        """Views of the held version's tensors. Rebuilding ~300 torch views
        costs milliseconds, so views are kept per image (one in place, two
        alternating staged) and reused while each tensor's pointer, size,
        dtype and shape stay the same; `views_generation` changes whenever
        the set handed out does."""
        ptr, n = ctypes.c_void_p(), ctypes.c_size_t()
        _lib.check(_lib.lib.wsync_receiver_image(self._r, ctypes.byref(ptr), ctypes.byref(n)),
                   "engine %s rank %d: the held image" % (self.engine, self.local_rank))
        if self._views is not None and self._views_key == self.version:
            return self._views
        bases = self._bases
        key = (ptr.value or 0, n.value)
        if key not in bases:
            bases[key] = bytes_at(key[0], key[1], self._dev)
            while len(bases) > 2:  # staged: two images alternate
                bases.pop(next(iter(bases)))
        base = bases[key]
        old, old_meta = self._cache.get(key, ({}, {}))
        views, meta, changed = {}, {}, False
        info, tp = _lib.TensorInfo(), ctypes.c_void_p()
        for i in range(_lib.lib.wsync_receiver_tensor_count(self._r)):
            _lib.check(_lib.lib.wsync_receiver_tensor_at(self._r, i, ctypes.byref(tp), ctypes.byref(info)),
                       "engine %s rank %d: tensor %d" % (self.engine, self.local_rank, i))
            name = info.name.decode()
            m = (tp.value, info.size, info.dtype, tuple(info.shape[:info.ndim]))
            if old_meta.get(name) == m:
                views[name] = old[name]
            else:
                dtype = torch_dtype(info.dtype.decode(), "tensor '%s'" % name)
                views[name] = typed_view(base, info.offset, info.size, dtype, m[3])
                changed = True
            meta[name] = m
        if not changed and len(views) == len(old):
            views = old
        if views is not self._last:
            self.views_generation += 1
            self._last = views
        self._cache = {k: v for k, v in self._cache.items() if k in bases}
        self._cache[key] = (views, meta)
        self._views, self._views_key = views, self.version
        return views

    def _copy_into(self):
        views = self._held_views()
        self.check_into(views)
        for name, dst in self._into.items():
            dst.copy_(views[name])
        sync(self._dev)

    def check_into(self, views=None):
        """Check `into` against the held version's manifest: every name known,
        dtype and shape equal (raises wsync.Error naming the tensor)."""
        views = views if views is not None else self._held_views()
        for name, dst in self._into.items():
            if name not in views:
                raise invalid("into: tensor '%s' is not in the published manifest (which has %d tensors, e.g. %s)"
                              % (name, len(views), ", ".join(list(views)[:3])))
            src = views[name]
            if dst.dtype != src.dtype:
                raise invalid("into: tensor '%s' is %s but the manifest says %s" % (name, dst.dtype, src.dtype))
            if tuple(dst.shape) != tuple(src.shape):
                raise invalid("into: tensor '%s' has shape %s but the manifest says %s"
                              % (name, tuple(dst.shape), tuple(src.shape)))

    def tensors(self):
        """name -> torch tensor of the held version, on the receiver's device:
        `into`'s own tensors for the names it has, views over wsync's image (no
        copy) for the rest. The views are valid until the next pull (staged:
        the images alternate; in-place: they stay put but are overwritten
        during a pull) and until close(); clone what must outlive that."""
        self._live()
        if self.version == 0:
            return {}
        views = dict(self._held_views())
        if self._into is not None:
            views.update(self._into)
        return views

    def close(self):
        """Free the receiver and its images (views from tensors() die with them). Idempotent."""
        if self._r is not None:
            _lib.lib.wsync_receiver_destroy(self._r)
            self._r = None
            self._views, self._cache, self._bases = None, {}, {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
