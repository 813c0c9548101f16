"""shard.py: a state dict as the fsdp layout's per-rank shards (for
wsync.Publisher(..., shapes=..., layout="fsdp")), from DTensors when this torch
has them (FSDP2 keeps its parameters as DTensors sharded on dim 0)."""
import torch

from ._lib import WSYNC_ERR_INVALID, WSYNC_ERR_UNSUPPORTED, Error


def _dtensor_class():
    for mod in ("torch.distributed.tensor", "torch.distributed._tensor"):
        try:
            m = __import__(mod, fromlist=["DTensor"])
            return m.DTensor, m.Shard, m.Replicate
        except (ImportError, AttributeError):
            continue
    return None


def dtensor_available():
    """True when this torch has DTensor (torch 2.x; not 1.13)."""
    return _dtensor_class() is not None


def _chunk(t, world, rank):
    if t.dim() == 0:
        return t
    parts = torch.chunk(t, world, 0)
    return parts[rank] if rank < len(parts) else t[0:0]


def shard_state_dict(state_dict, rank=None, world=None):
    """(tensors, shapes, rank, world) for wsync.Publisher(control, rank, world,
    tensors, shapes=shapes, layout="fsdp"). DTensors sharded on dim 0 of a 1-D
    mesh give their local shard (rank and world come from the mesh);
    replicated DTensors and plain tensors are cut with torch.chunk(t, world,
    0)[rank] (give rank and world for those). Anything else (another sharded
    dim, partial sums, a 2-D mesh) is refused naming the tensor."""
    classes = _dtensor_class()
    tensors, shapes = {}, {}
    for name, t in state_dict.items():
        if classes is not None and isinstance(t, classes[0]):
            dt_cls, shard_cls, repl_cls = classes
            mesh = t.device_mesh
            if mesh.ndim != 1:
                raise Error(WSYNC_ERR_UNSUPPORTED, "tensor '%s': a DTensor on a %d-D mesh; wsync's fsdp layout "
                            "splits on one mesh dimension" % (name, mesh.ndim))
            p = t.placements[0]
            m_world = mesh.size()
            m_rank = mesh.get_local_rank() if hasattr(mesh, "get_local_rank") else mesh.get_coordinate()[0]
            if (rank is not None and rank != m_rank) or (world is not None and world != m_world):
                raise Error(WSYNC_ERR_INVALID, "tensor '%s': its mesh says rank %d of %d, the call says %s of %s"
                            % (name, m_rank, m_world, rank, world))
            rank, world = m_rank, m_world
            if isinstance(p, shard_cls) and p.dim == 0:
                local = t.to_local()
            elif isinstance(p, repl_cls):
                local = _chunk(t.to_local(), world, rank)
            else:
                raise Error(WSYNC_ERR_UNSUPPORTED, "tensor '%s': placement %s; wsync's fsdp layout takes Shard(0) "
                            "or Replicate()" % (name, p))
            tensors[name], shapes[name] = local, tuple(t.shape)
            continue
        if not isinstance(t, torch.Tensor):
            raise Error(WSYNC_ERR_INVALID, "tensor '%s' is a %s, not a torch tensor" % (name, type(t).__name__))
        if rank is None or world is None:
            raise Error(WSYNC_ERR_INVALID, "tensor '%s' is a plain tensor: give rank= and world= to cut it" % name)
        tensors[name], shapes[name] = _chunk(t.detach(), world, rank), tuple(t.shape)
    if rank is None:
        raise Error(WSYNC_ERR_INVALID, "an empty state dict has nothing to shard")
    return tensors, shapes, rank, world
