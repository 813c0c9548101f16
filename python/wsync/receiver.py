"""receiver.py: wsync.Receiver, one local rank of an engine node.

Without `into`, tensors() are views over the receiver's own image (no copy):
in mode "in-place" the image never moves, so an engine can make those views
its tensors and every pull lands in them (wsync.hf does this with a model's
parameters). With `into` (the engine's own tensors), they are the C
receiver's `dests`: in mode "in-place" each chunk's bytes are written into
them during the pull and verification digests them there; in mode "staged"
the pull lands in wsync's image (a second one unless `into` holds every
tensor on every local rank) and is copied into them only once every local
rank verified it (a failed pull leaves them as they were).
Before any byte of a new layout moves, the C receiver hands this rank's
tensors (the manifest's, or the target's destination tensors) to a callback
here, which checks every `into` tensor's name, dtype and shape and refuses
the pull naming the tensor; the C side checks byte counts again.
"""
import json
import ctypes
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as _SliceOver

import torch

from . import _lib
from ._torch import TO_NAME, bytes_at, device_string, invalid, sync, torch_dtype, typed_view
from .publisher import check_tensors

_MODES = {"staged": _lib.MODE_STAGED, "in-place": _lib.MODE_IN_PLACE}


def _dtype_name(dtype):
    return TO_NAME.get(dtype, str(dtype))


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
        self._r, self._worker = None, None
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
        self._check_error, self._check_fn, self._dests = None, None, None
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
        if self._into is not None:
            self._set_dests(cfg)
        self._cancel = ctypes.c_int(0)
        cfg.cancel = ctypes.pointer(self._cancel)
        self._cfg = cfg
        self._r = self._create_interruptibly(cfg)

    def _create_interruptibly(self, cfg):
        """wsync_receiver_create, which may wait for the control endpoint
        (down: up to its grace period) or, on a rank > 0, for local rank 0's
        node board (up to 30 s). Interruptible as pull() is: from the main
        thread it runs on the worker thread; at Ctrl-C the config's cancel
        flag stops its waits (within ~20 ms, nothing left behind), a receiver
        made meanwhile is destroyed, and the KeyboardInterrupt goes on."""
        r = ctypes.c_void_p()

        def run():
            st = _lib.lib.wsync_receiver_create(ctypes.byref(cfg), ctypes.byref(r))
            return st, _lib.last_error() if st else ""

        def cancel():
            self._cancel.value = 1

        try:
            st, detail = self._interruptibly(run, cancel)
        except BaseException:
            if r.value:
                _lib.lib.wsync_receiver_destroy(r)
            self._stop_worker()
            raise
        if st != 0:
            self._stop_worker()
        _lib.check(st, "engine %s rank %d: creating the receiver" % (self.engine, self.local_rank), detail)
        return r

    def _stop_worker(self):
        if self._worker is not None:
            self._worker.shutdown(wait=True)
            self._worker = None

    def _interruptibly(self, run, cancel):
        """run() on this receiver's worker thread while the main thread waits
        in 0.1 s slices (Python runs signal handlers only between bytecodes
        of the main thread, never inside a C call); at an exception there
        (KeyboardInterrupt) cancel() is called, run() waited for, and the
        exception goes on. Off the main thread, run() alone."""
        if threading.current_thread() is not threading.main_thread():
            return run()
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="wsync-receiver")
        fut = self._worker.submit(run)
        try:
            while True:
                try:
                    return fut.result(timeout=0.1)
                except _SliceOver:
                    continue
        except BaseException:
            cancel()
            fut.result()
            raise

    def _set_dests(self, cfg):
        """`into` as the C config's dests, and the callback that checks them."""
        items = list(self._into.items())
        self._dest_names = [n.encode() for n, _ in items]  # kept alive: the C side holds the pointers
        arr = (_lib.DestTensor * max(len(items), 1))()
        for i, (n, t) in enumerate(items):
            arr[i].name = self._dest_names[i]
            arr[i].ptr = t.data_ptr()
            arr[i].nbytes = t.numel() * t.element_size()
        self._dests = arr
        cfg.dests = ctypes.cast(arr, ctypes.POINTER(_lib.DestTensor))
        cfg.ndests = len(items)
        self._check_fn = _lib.CHECK_DESTS(self._on_check)
        cfg.check_dests = ctypes.cast(self._check_fn, ctypes.c_void_p)

    def _on_check(self, _arg, infos, n):
        """The C receiver's check_dests: the tensors this rank will hold, before
        any byte moves. Never raises into C: a refusal is kept for pull()."""
        try:
            held = {}
            for i in range(n):
                info = infos[i]
                held[info.name.decode()] = (info.dtype.decode(), tuple(info.shape[:info.ndim]))
            self._check_into_against(held)
            return 0
        except Exception as e:  # noqa: BLE001 - handed back to pull()
            self._check_error = e if isinstance(e, _lib.Error) else invalid("into: %s" % (e,))
            return _lib.WSYNC_ERR_INVALID

    def _check_into_against(self, held):
        """held: name -> (safetensors dtype name, shape) of the tensors this
        rank holds; every `into` tensor must be one of them, equal in both."""
        for name, dst in self._into.items():
            if name not in held:
                raise invalid("into: tensor '%s' is not in the published manifest (which has %d tensors, e.g. %s)"
                              % (name, len(held), ", ".join(list(held)[:3])))
            dtype_name, shape = held[name]
            want = torch_dtype(dtype_name, "tensor '%s'" % name)
            if dst.dtype != want:
                raise invalid("into: tensor '%s' is %s but the manifest says %s" % (name, dst.dtype, want))
            if tuple(dst.shape) != shape:
                raise invalid("into: tensor '%s' has shape %s but the manifest says %s"
                              % (name, tuple(dst.shape), shape))

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
        than the one held, waiting up to `timeout` seconds for one; a version
        not published yet is waited for too; one no longer retained raises at
        once, naming the retained ones). Returns the
        version now held, verified on every local rank. Raises wsync.Error
        (wsync.TimeoutError on a timeout); in mode "staged" the held version,
        and `into`, stay as they were; in mode "in-place" a failed pull leaves
        nothing held and `into` invalid (partly written) until a pull succeeds.
        An `into` tensor whose name, dtype or shape does not match is refused
        before anything is written."""
        self._live()
        if version is not None and (not isinstance(version, int) or version < 1):
            raise invalid("version=%r must be a positive integer or None (the newest)" % (version,))
        if timeout is None or timeout < 0:
            raise invalid("timeout=%r must be a number of seconds >= 0" % (timeout,))
        got = ctypes.c_uint64(0)
        ms = int(min(timeout * 1000.0, 2**31 - 1))
        if self._into is not None:
            sync(self._dev)  # torch's queued work on `into` ends before wsync writes it
        self._check_error = None
        st, detail = self._pull_interruptibly(version or 0, ms, got)
        self._views = None
        if st != 0 and self._check_error is not None:
            e, self._check_error = self._check_error, None
            raise e
        _lib.check(st, "engine %s rank %d: pull of %s" % (self.engine, self.local_rank,
                                                          "version %d" % version if version else "the newest version"),
                   detail)
        return got.value

    def _pull_interruptibly(self, version, ms, got):
        """The C pull, (status, its error text). Python runs signal handlers
        only between bytecodes of the main thread, never inside a C call: from
        the main thread the pull runs on this receiver's own worker thread
        while this one waits in 0.1 s slices, so Ctrl-C raises
        KeyboardInterrupt at once; the pull is cancelled
        (wsync_receiver_cancel) and waited for (it returns within ~20 ms,
        the node keeping the version it held) before the exception goes on."""
        def run():
            st = _lib.lib.wsync_receiver_pull(self._r, version, ms, ctypes.byref(got))
            return st, _lib.last_error() if st else ""

        def cancel():
            _lib.lib.wsync_receiver_cancel(self._r)

        try:
            return self._interruptibly(run, cancel)
        except BaseException:
            _lib.lib.wsync_receiver_cancel_clear(self._r)  # the next pull runs
            raise

    def progress(self):
        """Where this rank's pull stands (callable from another thread while
        pull() runs): a dict with "phase" ("idle", "setup": the first pull
        reserving image memory, or "landing"), "version", "done" and "total"
        bytes, "elapsed_s" in this phase and "last_setup_s" (how long the
        set-up took, 0 before it ran)."""
        self._live()
        p = _lib.PullProgress()
        _lib.lib.wsync_receiver_progress(self._r, ctypes.byref(p))
        return {"phase": p.phase.decode() if p.phase else "idle", "version": p.version, "done": p.done,
                "total": p.total, "elapsed_s": p.elapsed_s, "last_setup_s": p.last_setup_s}

    @property
    def last_pull(self):
        """What this rank's last pull received as delta wires (docs/DELTA.md):
        a dict with "version" (held), "delta_pieces" (applied and verified),
        "wire_bytes" (their wires), "piece_bytes" (the pieces' own bytes),
        "saved_bytes" (the difference) and "refetched" (pieces that failed
        their check and came again in full); all 0 after a full pull."""
        self._live()
        d = _lib.PullDeltaStats()
        _lib.lib.wsync_receiver_last_delta(self._r, ctypes.byref(d))
        return {"version": d.version, "delta_pieces": d.pieces, "wire_bytes": d.wire_bytes,
                "piece_bytes": d.piece_bytes, "saved_bytes": d.piece_bytes - d.wire_bytes, "refetched": d.refetched}

    def _held_views(self):
        """Views of the held version's tensors. Rebuilding ~300 torch views
        costs milliseconds, so views are kept per image (one in place, two
        alternating staged) and reused while each tensor's pointer, size,
        dtype and shape stay the same; `views_generation` changes whenever
        the set handed out does. While the C receiver's layout generation
        and the image stay the same (every pull of one training run) the
        kept views are handed out without asking for each tensor again."""
        ptr, n = ctypes.c_void_p(), ctypes.c_size_t()
        _lib.check(_lib.lib.wsync_receiver_image(self._r, ctypes.byref(ptr), ctypes.byref(n)),
                   "engine %s rank %d: the held image" % (self.engine, self.local_rank))
        if self._views is not None and self._views_key == self.version:
            return self._views
        bases = self._bases
        key = (ptr.value or 0, n.value)
        gen = _lib.lib.wsync_receiver_layout_generation(self._r)
        kept = self._cache.get(key)
        if kept is not None and kept[2] == gen and key in bases:
            views = kept[0]
            if views is not self._last:
                self.views_generation += 1
                self._last = views
            self._views, self._views_key = views, self.version
            return views
        if key not in bases:
            bases[key] = bytes_at(key[0], key[1], self._dev)
            while len(bases) > 2:  # staged: two images alternate
                bases.pop(next(iter(bases)))
        base = bases[key]
        old, old_meta = self._cache.get(key, ({}, {}, None))[:2]
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
        self._cache[key] = (views, meta, gen)
        self._views, self._views_key = views, self.version
        return views

    def check_into(self, views=None):
        """Check `into` against the held version's tensors: every name known,
        dtype and shape equal (raises wsync.Error naming the tensor). Pulls
        do this themselves before anything is written."""
        views = views if views is not None else self._held_views()
        self._check_into_against({n: (_dtype_name(v.dtype), tuple(v.shape)) for n, v in views.items()})

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
        if self._worker is not None:
            self._worker.shutdown(wait=True)
            self._worker = None
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
