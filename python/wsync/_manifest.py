"""_manifest.py: the manifest (image layout) of a set of torch tensors, and the
dim-0 split of the fsdp layout, computed as common/model/layout.c computes it."""
import ctypes
import json

from . import _lib
from ._torch import dtype_name, invalid

ALIGN = 256


def _align(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


class Entry:
    __slots__ = ("name", "dtype", "dtype_name", "shape", "offset", "size")

    def __init__(self, name, dtype, shape, offset, size):
        self.name, self.dtype, self.shape, self.offset, self.size = name, dtype, tuple(shape), offset, size
        self.dtype_name = dtype_name(dtype, "tensor '%s'" % name)


def build(specs, metadata=None):
    """specs: [(name, torch dtype, global shape)] in image order. Returns
    (entries, image_size, manifest JSON text)."""
    entries, off = [], 0
    for name, dtype, shape in specs:
        if not isinstance(name, str) or not name:
            raise invalid("tensor name %r: names must be non-empty strings" % (name,))
        if len(shape) > _lib.MAX_DIMS:
            raise invalid("tensor '%s': %d dimensions, wsync carries at most %d" % (name, len(shape), _lib.MAX_DIMS))
        n = 1
        for d in shape:
            n *= int(d)
        size = n * _element_size(dtype)
        off = _align(off)
        entries.append(Entry(name, dtype, shape, off, size))
        off += size
    image_size = _align(off)
    doc = {"version": 1, "align": ALIGN, "image_size": image_size,
           "tensors": [{"name": e.name, "dtype": e.dtype_name, "shape": list(e.shape), "offset": e.offset,
                        "size": e.size} for e in entries]}
    if metadata:
        doc["metadata"] = {str(k): str(v) for k, v in metadata.items()}
    return entries, image_size, json.dumps(doc)


def _element_size(dtype):
    import torch
    return torch.empty((), dtype=dtype).element_size()


def fsdp_rows(rows, world, rank):
    """Rows [lo, hi) of a dim-0 split that rank owns: torch.chunk(t, world, 0)
    makes chunks of ceil(rows/world) rows, the last one shorter, and fewer than
    world chunks when they run out (ranks past them own nothing): the same rule
    as wsync_layout_fsdp."""
    per = -(-rows // world) if rows else 0
    lo = min(rank * per, rows)
    return lo, min(lo + per, rows)


def owned_extents(manifest_json, layout, world, rank):
    """[(offset, len)] the C library says rank owns, in offset order."""
    n = ctypes.c_int(0)
    _lib.check(_lib.lib.wsync_publisher_owned_extents(manifest_json.encode(), layout, world, rank, None, 0,
                                                      ctypes.byref(n)), "owned extents of rank %d" % rank)
    arr = (_lib.Owned * max(n.value, 1))()
    _lib.check(_lib.lib.wsync_publisher_owned_extents(manifest_json.encode(), layout, world, rank, arr, n.value,
                                                      ctypes.byref(n)), "owned extents of rank %d" % rank)
    return [(arr[i].offset, arr[i].len) for i in range(n.value)]


def check_against(specs, manifest, rank):
    """Refuse specs [(name, dtype, global shape)] that differ from `manifest`
    (JSON text or its parsed dict), naming the first tensor that does."""
    doc = json.loads(manifest) if isinstance(manifest, (str, bytes)) else manifest
    want = {t["name"]: (i, t["dtype"], tuple(t["shape"])) for i, t in enumerate(doc.get("tensors", []))}
    for i, (name, dtype, shape) in enumerate(specs):
        if name not in want:
            raise invalid("rank %d: tensor '%s' is not in the manifest" % (rank, name))
        j, dt, sh = want[name]
        mine = dtype_name(dtype, "tensor '%s'" % name)
        if mine != dt:
            raise invalid("rank %d: tensor '%s' is %s (%s) but the manifest says %s" % (rank, name, mine, dtype, dt))
        if tuple(shape) != sh:
            raise invalid("rank %d: tensor '%s' has global shape %s but the manifest says %s"
                          % (rank, name, tuple(shape), sh))
        if j != i:
            raise invalid("rank %d: tensor '%s' is number %d here but %d in the manifest (every rank passes its "
                          "tensors in the manifest's order)" % (rank, name, i, j))
    if len(specs) != len(want):
        names = {n for n, _, _ in specs}
        missing = [n for n in want if n not in names]
        raise invalid("rank %d: tensor '%s' of the manifest was not given" % (rank, missing[0]))
