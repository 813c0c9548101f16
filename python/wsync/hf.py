"""hf.py: publish a transformers model's weights and receive them into a
model's parameters in place.

Works on any torch.nn.Module (a transformers PreTrainedModel is one); nothing
here imports transformers. Tied weights (lm_head.weight sharing
model.embed_tokens.weight) are published once, under the name save_pretrained
keeps, and the receiving model gets both names pointed at the one received
tensor, so its ties hold after every pull.
"""
from . import _lib
from ._torch import invalid
from .shard import _dtensor_class, shard_state_dict
from .publisher import Publisher as _Publisher
from .publisher import pack as _pack
from .receiver import Receiver as _Receiver


def _tied_names(model):
    """Names transformers drops when saving (its _tied_weights_keys: a list of
    names or patterns, or in transformers 5 a dict target -> source)."""
    keys = getattr(model, "_tied_weights_keys", None) or []
    return set(keys.keys() if isinstance(keys, dict) else keys)


def tensor_groups(model):
    """[(kept name, [names], [tensor objects])]: the model's parameters and
    persistent buffers grouped by the memory they share, in state-dict order;
    the kept name is the one save_pretrained keeps (not a tied key)."""
    groups, order = {}, []
    dt = _dtensor_class()
    for name, t in model.state_dict(keep_vars=True).items():
        local = t.to_local() if dt is not None and isinstance(t, dt[0]) else t  # FSDP2: DTensor parameters
        key = (local.data_ptr(), t.dtype, tuple(t.shape), tuple(local.stride())) if local.numel() else ("empty", name)
        if key not in groups:
            groups[key] = ([], [])
            order.append(key)
        names, objs = groups[key]
        names.append(name)
        if not any(o is t for o in objs):
            objs.append(t)
    dropped = _tied_names(model)
    out = []
    for key in order:
        names, objs = groups[key]
        kept = next((n for n in names if n not in dropped), names[0])
        out.append((kept, names, objs))
    return out


def state_dict(model):
    """name -> tensor of what wsync.hf publishes: every parameter and persistent
    buffer once (tied ones under the kept name), detached, no copy."""
    return {kept: objs[0].detach() for kept, _names, objs in tensor_groups(model)}


class Publisher(_Publisher):
    """wsync.Publisher over a model's weights: full tensors on every rank
    (DDP, or after a full state-dict gather), or an FSDP2 model's DTensor
    shards (then layout="fsdp", each rank publishing its local shards).
    pack=True moves the model's parameters into one buffer laid out as wsync's
    image (same Parameter objects, so an optimizer built before keeps working):
    publish() then reads them in place, with no staging copy."""

    def __init__(self, control, rank, world, model, *, pack=False, **kwargs):
        groups = tensor_groups(model)
        tensors = {kept: objs[0].detach() for kept, _n, objs in groups}
        dt = _dtensor_class()
        if dt is not None and any(isinstance(t, dt[0]) for t in tensors.values()):
            # An FSDP2 model: publish each rank's dim-0 shards where they are.
            if pack:
                raise invalid("pack=True takes full tensors; an FSDP2 (DTensor) model publishes its shards")
            tensors, shapes, r, w = shard_state_dict(tensors)
            if (r, w) != (rank, world):
                raise invalid("rank %d of %d given, but the model's device mesh says %d of %d" % (rank, world, r, w))
            kwargs["shapes"], kwargs["layout"] = shapes, "fsdp"
        elif pack:
            packed = _pack(tensors, kwargs.get("device"))
            for kept, _names, objs in groups:
                for o in objs:
                    o.data = packed[kept]
            tensors = packed
        self.model = model
        super().__init__(control, rank, world, tensors, **kwargs)


class Receiver:
    """Receives into `model`'s parameters in place: after every pull the
    model's parameters and buffers are the received tensors themselves (views
    over wsync's image, no copy), ties restored. In mode "in-place" (the
    default) the image stays put, so from the second pull on the bytes land
    straight in the parameters; in "staged" the parameters are re-pointed at
    the new image after it verified (the old version stays in use until then).
    Every local rank of the node creates one. strict=False tolerates published
    tensors the model lacks and model tensors that were not published."""

    def __init__(self, control, engine, local_rank, local_world, model, *, mode="in-place", device=None,
                 token=None, strict=True, **kwargs):
        self.model, self.strict = model, strict
        self._groups = tensor_groups(model)
        if device is None:
            first = next((objs[0] for _k, _n, objs in self._groups), None)
            device = first.device if first is not None else None
        self._rcv = _Receiver(control, engine, local_rank, local_world, mode=mode, device=device, token=token,
                              **kwargs)
        self._bound = None

    @property
    def version(self):
        return self._rcv.version

    @property
    def receiver(self):
        """The wsync.Receiver underneath."""
        return self._rcv

    def pull(self, version=None, timeout=60.0):
        """wsync.Receiver.pull, then the model's tensors are pointed at the
        held version (checked first: a dtype or shape that differs, or, with
        strict, a tensor missing on either side, raises naming it and leaves
        the model as it was)."""
        got = self._rcv.pull(version, timeout)
        self._bind()
        return got

    def _bind(self):
        views = self._rcv.tensors()
        if self._bound is not None and self._bound == self._rcv.views_generation:
            return  # the same tensors as bound last time (in place: every pull after the first)
        plan, seen = [], set()
        for kept, names, objs in self._groups:
            name = next((n for n in [kept] + names if n in views), None)
            if name is None:
                if self.strict:
                    raise invalid("model tensor '%s' is not in the published manifest" % kept
                                  + (" (nor its tied names %s)" % ", ".join(names[1:]) if len(names) > 1 else ""))
                continue
            v = views[name]
            if v.dtype != objs[0].dtype or tuple(v.shape) != tuple(objs[0].shape):
                raise invalid("model tensor '%s' is %s %s but the published one is %s %s"
                              % (kept, objs[0].dtype, tuple(objs[0].shape), v.dtype, tuple(v.shape)))
            seen.add(name)
            plan.append((objs, v))
        extra = [n for n in views if n not in seen]
        if extra and self.strict:
            raise invalid("published tensor '%s' has no place in the model (%d such; strict=False ignores them)"
                          % (extra[0], len(extra)))
        for objs, v in plan:
            for o in objs:
                o.data = v
        self._bound = self._rcv.views_generation

    def close(self, keep=True):
        """Free the receiver. keep=True first gives the model its own copy of
        the weights (they lived in wsync's image, which goes away)."""
        if self._rcv is None:
            return
        if keep and self._bound is not None:
            for _kept, _names, objs in self._groups:
                clone = objs[0].data.clone()
                for o in objs:
                    o.data = clone
        self._bound = None
        self._rcv.close()
        self._rcv = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
