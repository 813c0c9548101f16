"""_torch.py: torch <-> wsync: dtype names, device strings, byte views of
tensors, and zero-copy tensors over memory the C library owns."""
import ctypes

import torch

from ._lib import WSYNC_ERR_INVALID, Error

# torch dtype -> safetensors dtype name (the manifest's). Newer dtypes only
# where this torch has them.
_DTYPES = [
    ("bool", "BOOL"), ("uint8", "U8"), ("int8", "I8"), ("int16", "I16"), ("int32", "I32"),
    ("int64", "I64"), ("float16", "F16"), ("bfloat16", "BF16"), ("float32", "F32"),
    ("float64", "F64"), ("complex64", "C64"), ("uint16", "U16"), ("uint32", "U32"),
    ("uint64", "U64"), ("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2"),
    ("float8_e8m0fnu", "F8_E8M0"),
]
TO_NAME = {getattr(torch, t): n for t, n in _DTYPES if hasattr(torch, t)}
FROM_NAME = {n: t for t, n in TO_NAME.items()}


def invalid(msg):
    return Error(WSYNC_ERR_INVALID, msg)


def dtype_name(dtype, what):
    try:
        return TO_NAME[dtype]
    except KeyError:
        raise invalid("%s: dtype %s has no safetensors name; wsync carries %s"
                      % (what, dtype, ", ".join(sorted(str(d) for d in TO_NAME)))) from None


def torch_dtype(name, what):
    try:
        return FROM_NAME[name]
    except KeyError:
        raise invalid("%s: dtype %s has no torch equivalent in torch %s" % (what, name, torch.__version__)) from None


def device_string(device):
    """A torch device (or string) as the C library names it: "host" or "cuda:N"."""
    if device is None:
        return "host"
    if isinstance(device, str) and device in ("host", "cpu"):
        return "host"
    d = torch.device(device)
    if d.type == "cpu":
        return "host"
    if d.type == "cuda":
        return "cuda:%d" % (d.index if d.index is not None else torch.cuda.current_device())
    raise invalid("device %s: wsync holds tensors on the CPU or on cuda:N" % (device,))


def torch_device(dev):
    return torch.device("cpu") if dev == "host" else torch.device(dev)


def byte_view(t):
    """The bytes of a contiguous tensor, as a 1-D uint8 view (no copy)."""
    flat = t.reshape(-1)
    if flat.numel() == 0:
        return torch.empty(0, dtype=torch.uint8, device=t.device)
    return flat.view(torch.uint8) if flat.element_size() != 1 or flat.dtype != torch.uint8 else flat


def sync(dev):
    """Wait for torch's queued work on `dev` (a C-side read or write must see it)."""
    if dev != "host":
        torch.cuda.synchronize(torch.device(dev))


class _CudaBytes:
    """A device range through __cuda_array_interface__, which torch.as_tensor
    wraps without copying."""

    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 2, "strides": None}


def bytes_at(ptr, n, dev):
    """A uint8 tensor over n bytes at ptr (host or cuda:N), no copy. The memory
    stays the C library's: the tensor is valid only while it is."""
    if n == 0 or not ptr:
        return torch.empty(0, dtype=torch.uint8, device=torch_device(dev))
    if dev == "host":
        return torch.frombuffer((ctypes.c_uint8 * n).from_address(ptr), dtype=torch.uint8)
    return torch.as_tensor(_CudaBytes(ptr, n), device=torch.device(dev))


def typed_view(base, offset, size, dtype, shape):
    """Tensor of `dtype`/`shape` over base[offset:offset+size] (uint8), no copy."""
    b = base[offset:offset + size]
    if len(shape) == 0 or size == 0:
        return b.view(dtype).reshape(shape) if size else torch.empty(shape, dtype=dtype, device=base.device)
    return b.view(dtype).view(shape)
