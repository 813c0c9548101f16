"""publisher.py: wsync.Publisher, a trainer rank publishing torch tensors.

The C publisher reads one pointer per extent of the image the rank owns. An
extent that is one tensor's bytes (or one shard's), or that lies in memory
whose bytes sit at their image offsets (wsync.pack), is read where it is;
any other extent (several tensors, or tensors and the zero padding between
them) is gathered into a staging buffer on the tensors' device at publish(),
one copy per tensor piece, before the C library digests it.
"""
import bisect
import ctypes
from collections.abc import Mapping

import torch

from . import _lib, _manifest
from ._torch import byte_view, device_string, invalid, sync

_LAYOUTS = {"even": _lib.LAYOUT_EVEN, "fsdp": _lib.LAYOUT_FSDP}

# Memory known to hold each tensor at its image offset with zeroed padding
# (from wsync.pack): data_ptr of the buffer -> (length, buffer).
_packed = {}


def check_tensors(tensors, device, what="tensors"):
    """The tensors' common wsync device string, after checking each is a dense,
    contiguous torch tensor on that one device (naming the first that is not)."""
    if not isinstance(tensors, Mapping) or len(tensors) == 0:
        raise invalid("%s must be a non-empty mapping of names to torch tensors" % what)
    first = None
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise invalid("tensor '%s' is a %s, not a torch tensor" % (name, type(t).__name__))
        if t.layout != torch.strided:
            raise invalid("tensor '%s' is %s; wsync carries dense (strided) tensors" % (name, t.layout))
        if not t.is_contiguous():
            raise invalid("tensor '%s' is not contiguous (strides %s); pass a contiguous tensor, e.g. "
                          "t.contiguous(), and publish that one every version" % (name, tuple(t.stride())))
        if first is None:
            first = (name, t.device)
        elif t.device != first[1]:
            raise invalid("tensor '%s' is on %s but tensor '%s' is on %s: one publisher's (or receiver's) "
                          "tensors live on one device" % (name, t.device, first[0], first[1]))
    dev = device_string(first[1])
    if device is not None and device_string(device) != dev:
        raise invalid("device=%s, but the tensors are on %s (tensor '%s')" % (device, first[1], first[0]))
    return dev


def pack(tensors, device=None):
    """Copies of `tensors` laid out in one buffer exactly as wsync's image lays
    them out (each at its image offset, zero padding between). A Publisher of
    full tensors given these reads them in place: publish() needs no staging
    copy, and zero_copy=True is possible. Returns a dict name -> tensor view;
    keep writing into those views (e.g. make them a model's parameters)."""
    dev = check_tensors(tensors, device)
    entries, image_size, _ = _manifest.build([(n, t.dtype, tuple(t.shape)) for n, t in tensors.items()])
    buf = torch.zeros(image_size, dtype=torch.uint8, device=tensors[entries[0].name].device)
    _packed[buf.data_ptr()] = (image_size, buf)
    out = {}
    for e in entries:
        src = tensors[e.name]
        v = buf[e.offset:e.offset + e.size]
        view = (v.view(src.dtype).view(src.shape) if e.size else torch.empty(src.shape, dtype=src.dtype,
                                                                             device=buf.device))
        view.copy_(src)
        out[e.name] = view
    return out


def _inside_packed(ptr, n):
    for base, (length, _) in _packed.items():
        if base <= ptr and ptr + n <= base + length:
            return True
    return False


class Publisher:
    """One trainer rank: `tensors` maps names to torch tensors (on the CPU or
    one cuda:N device), either full tensors on every rank (shapes=None: each
    rank sends its share), or with `shapes` (name -> global shape) and
    layout="fsdp" each rank's dim-0 shard, torch.chunk(t, world, 0)[rank]
    (an empty shard where a rank owns no rows). publish(v) returns when the
    caller may write its tensors again. Tensors must be updated in place (an
    optimizer step does): the publisher keeps their pointers. manifest= (a
    manifest JSON, e.g. rank 0's pub.manifest_json) checks the tensors against
    it first, naming any tensor whose name, dtype or shape differs (ranks that
    disagree are otherwise refused at publish with a 409 conflict)."""

    def __init__(self, control, rank, world, tensors, *, shapes=None, layout="even", device=None, token=None,
                 chunk=None, zero_copy=False, serve=None, listen=None, advertise_host=None, host_id=None,
                 metadata=None, manifest=None):
        self._p = None
        if layout not in _LAYOUTS:
            raise invalid("layout=%r: use \"even\" or \"fsdp\"" % (layout,))
        if not isinstance(world, int) or not isinstance(rank, int) or world < 1 or not 0 <= rank < world:
            raise invalid("rank %r must be in [0, world %r)" % (rank, world))
        if control is None and serve is None:
            raise invalid("give control (the control endpoint's URL) or serve (HOST:PORT to run it here)")
        if shapes is not None and layout != "fsdp":
            raise invalid("shapes= describes dim-0 shards, which only layout=\"fsdp\" splits tensors into; "
                          "without shapes every rank passes full tensors")
        if chunk is not None and (not isinstance(chunk, int) or chunk <= 0):
            raise invalid("chunk=%r must be a positive number of bytes" % (chunk,))
        self._dev = check_tensors(tensors, device)
        self._tensors = {n: t.detach() for n, t in tensors.items()}
        specs = self._specs(shapes, rank, world)
        if manifest is not None:
            _manifest.check_against(specs, manifest, rank)
        self._entries, self.image_size, self.manifest_json = _manifest.build(specs, metadata)
        self._offsets = [e.offset for e in self._entries]
        self.rank, self.world, self.layout = rank, world, layout
        extents = _manifest.owned_extents(self.manifest_json, _LAYOUTS[layout], world, rank)
        self._plan_reads(extents, shapes, zero_copy)
        self._version = 0
        self.hold_error = ""  # why the last wait_held returned False

        cfg = _lib.PublisherConfig()
        cfg.control_url = _lib.cstr(control)
        cfg.token = _lib.cstr(token)
        cfg.rank, cfg.world = rank, world
        cfg.manifest_json = self.manifest_json.encode()
        cfg.layout = _LAYOUTS[layout]
        cfg.chunk_size = chunk or 0
        cfg.owned = self._owned
        cfg.nowned = len(extents)
        cfg.device = self._dev.encode()
        cfg.zero_copy = 1 if zero_copy else 0
        cfg.listen = _lib.cstr(listen)
        cfg.advertise_host = _lib.cstr(advertise_host)
        cfg.host_id = _lib.cstr(host_id)
        cfg.serve = _lib.cstr(serve)
        self._cfg = cfg
        p = ctypes.c_void_p()
        _lib.check(_lib.lib.wsync_publisher_create(ctypes.byref(cfg), ctypes.byref(p)),
                   "trainer rank %d: creating the publisher" % rank)
        self._p = p

    def _specs(self, shapes, rank, world):
        if shapes is None:
            return [(n, t.dtype, tuple(t.shape)) for n, t in self._tensors.items()]
        if not isinstance(shapes, Mapping):
            raise invalid("shapes must map tensor names to global shapes")
        for n in self._tensors:
            if n not in shapes:
                raise invalid("tensor '%s' has no global shape in shapes=" % n)
        specs = []
        for n, shape in shapes.items():
            if n not in self._tensors:
                raise invalid("shapes names tensor '%s' but no tensor was given for it: every rank passes every "
                              "tensor (an empty shard where it owns no rows), so all ranks build one manifest" % n)
            t, shape = self._tensors[n], tuple(int(d) for d in shape)
            rows = shape[0] if shape else 0
            if len(shape) == 0 or rows == 0:
                ok = tuple(t.shape) == shape or (rank != 0 and t.numel() == 0)
                want = "%s (rank 0 holds the whole of a tensor with no rows to split)" % (shape,)
            else:
                lo, hi = _manifest.fsdp_rows(rows, world, rank)
                local = (hi - lo,) + shape[1:]
                ok = tuple(t.shape) == local
                want = "%s = torch.chunk(t, %d, 0)[%d] of global shape %s" % (local, world, rank, shape)
            if not ok:
                raise invalid("tensor '%s' on rank %d has shape %s; expected %s" % (n, rank, tuple(t.shape), want))
            specs.append((n, t.dtype, shape))
        return specs

    def _sources(self, shapes):
        """(image lo, image hi, tensor name, byte offset in the tensor) of every
        byte range this rank holds, in image order."""
        out = []
        for e in self._entries:
            t = self._tensors[e.name]
            if shapes is None:
                lo = 0
                hi = e.size
            elif e.shape and e.shape[0] and e.size:
                rb = e.size // e.shape[0]
                r0, r1 = _manifest.fsdp_rows(e.shape[0], self.world, self.rank)
                lo, hi = r0 * rb, r1 * rb
            else:
                lo, hi = 0, (e.size if t.numel() else 0)
            if hi > lo:
                out.append((e.offset + lo, e.offset + hi, e.name, 0))
        return out

    def _plan_reads(self, extents, shapes, zero_copy):
        """One pointer per owned extent: into the caller's tensor where the
        extent is one tensor's contiguous bytes, else into the staging buffer
        (with the copies that fill it at publish)."""
        sources = self._sources(shapes)
        ends = {e.name: e.offset + e.size for e in self._entries}
        self._owned = (_lib.Owned * max(len(extents), 1))()
        self._copies = []
        staged, plans, si = 0, [], 0
        for off, length in extents:
            segs, pos = [], off
            while si < len(sources) and sources[si][1] <= off:
                si += 1
            k = si
            while pos < off + length:
                if k < len(sources) and sources[k][0] <= pos < sources[k][1]:
                    lo, hi, name, _ = sources[k]
                    end = min(hi, off + length)
                    segs.append((pos, end, name, pos - lo))
                    pos = end
                    k += 1
                elif k < len(sources) and sources[k][0] < off + length and sources[k][0] > pos:
                    self._check_padding(pos, sources[k][0], ends)
                    pos = sources[k][0]
                else:
                    self._check_padding(pos, off + length, ends)
                    pos = off + length
            plans.append((off, length, segs))
        for i, (off, length, segs) in enumerate(plans):
            ptr = self._direct(off, length, segs)
            self._owned[i].offset, self._owned[i].len = off, length
            if ptr is not None:
                self._owned[i].ptr = ptr
                plans[i] = None
            else:
                plans[i] = (off, length, segs, staged)
                staged += length
        self.staged_bytes = staged
        if staged and zero_copy:
            raise invalid("zero_copy=True needs every extent this rank owns to be read in place, but %d bytes "
                          "span several tensors (or tensors and padding) and would be gathered into a staging "
                          "buffer; pass tensors from wsync.pack(...) or drop zero_copy" % staged)
        dev = next(iter(self._tensors.values())).device
        self._staging = torch.zeros(staged, dtype=torch.uint8, device=dev) if staged else None
        for i, plan in enumerate(plans):
            if plan is None:
                continue
            off, length, segs, at = plan
            self._owned[i].ptr = self._staging.data_ptr() + at
            for lo, hi, name, src in segs:
                dst = self._staging[at + lo - off:at + hi - off]
                self._copies.append((dst, byte_view(self._tensors[name])[src:src + hi - lo]))

    def _check_padding(self, lo, hi, ends):
        """[lo, hi) has no source bytes: it must be padding between tensors, or
        the C layout gave this rank bytes the torch.chunk rule says it lacks."""
        i = bisect.bisect_right(self._offsets, lo) - 1  # the last tensor starting at or before lo
        for e in self._entries[max(i, 0):]:
            if e.offset >= hi:
                break
            if lo < e.offset + e.size and e.offset < hi:
                raise _lib.Error(_lib.WSYNC_ERR_INTERNAL,
                                 "tensor '%s': the layout gives rank %d image bytes [%d, %d) that its tensors do "
                                 "not hold (the C fsdp split and torch.chunk disagree)" % (e.name, self.rank, lo, hi))

    def _direct(self, off, length, segs):
        if not segs:
            return None
        first = segs[0]
        base = self._tensors[first[2]].data_ptr() + first[3] - (first[0] - off)
        for lo, _hi, name, src in segs:
            if self._tensors[name].data_ptr() + src != base + (lo - off):
                return None
        covered = sum(hi - lo for lo, hi, _, _ in segs)
        if covered == length or _inside_packed(base, length):
            return base
        return None

    @property
    def control_url(self):
        self._live()
        return _lib.lib.wsync_publisher_control_url(self._p).decode()

    @property
    def owned_bytes(self):
        self._live()
        return _lib.lib.wsync_publisher_owned_bytes(self._p)

    @property
    def version(self):
        """The last version published (0 before the first)."""
        return self._version

    def _live(self):
        if self._p is None:
            raise _lib.Error(_lib.WSYNC_ERR_INVALID, "this publisher is closed")

    def publish(self, version, single_copy=None):
        """Publish the tensors' current values as `version` (greater than the
        last). Returns when the caller may write its tensors again, except for
        a single-copy version: single_copy=True (or None with zero_copy=True)
        serves it straight out of the tensors, with no copy into a publish
        slot, and the tensors must not be written until wait_held(version)
        returns. single_copy=False copies into a slot (not with zero_copy)."""
        self._live()
        if not isinstance(version, int) or version <= self._version:
            raise invalid("version %r must be an integer above the last one published (%d)"
                          % (version, self._version))
        if single_copy not in (None, True, False):
            raise invalid("single_copy=%r must be True, False or None (the publisher's default)" % (single_copy,))
        opts = _lib.PublishOpts(0 if single_copy is None else
                                _lib.WSYNC_PUBLISH_SINGLE_COPY if single_copy else _lib.WSYNC_PUBLISH_SLOT)
        sync(self._dev)
        for dst, src in self._copies:
            dst.copy_(src)
        sync(self._dev)
        _lib.check(_lib.lib.wsync_publisher_publish_opts(self._p, version, ctypes.byref(opts)),
                   "trainer rank %d: publishing version %d" % (self.rank, version))
        self._version = version

    def wait_held(self, version, timeout_ms=10000):
        """After a single-copy publish(version): wait until every engine node
        registered from this host id holds `version` (reported ready) and no
        pull of it is in flight here, for up to timeout_ms. Then the version
        is released and the tensors may be written, whatever the outcome.
        Returns True when held, False when not (a timeout, or an engine node
        failed the version: `hold_error` says which and why). Raises
        wsync.Error for a version that was not published single-copy."""
        self._live()
        if not isinstance(timeout_ms, int) or timeout_ms < 0:
            raise invalid("timeout_ms=%r must be a non-negative integer" % (timeout_ms,))
        st = _lib.lib.wsync_publisher_wait_held(self._p, version, timeout_ms)
        if st in (_lib.WSYNC_ERR_TIMEOUT, _lib.WSYNC_ERR_PEER):
            self.hold_error = _lib.last_error()
            return False
        _lib.check(st, "trainer rank %d: waiting for version %d to be held" % (self.rank, version))
        self.hold_error = ""
        return True

    def close(self):
        """Stop serving pulls and free the C publisher. Idempotent."""
        if self._p is not None:
            _lib.lib.wsync_publisher_destroy(self._p)
            self._p = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
