#!/usr/bin/env bash
# The FP8 kernel against torch: tests/gpu/quant_test quantizes a 1024 x 1536
# BF16 matrix (values over many binades, a zero tile, an outlier) on the GPU
# and writes it with its codes and scales; torch computes, from
# docs/FP8.md, amax per 128 x 128 block, scale = amax / 448 (UE8M0: rounded
# up to a power of two) and (x / scale).clamp(-448, 448).to(torch.float8_e4m3fn),
# and the bytes must be equal. Skips without a GPU or without a torch that
# has float8_e4m3fn.
source "$(dirname "$0")/../integration/lib.sh"
BIN=${WSYNC_BUILD:-$WSYNC_ROOT/build}/tests/gpu/quant_test
PY=
for p in python3 /usr/bin/python3; do
    if $p -c 'import torch; torch.float8_e4m3fn' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then skip quant_torch "no python with torch.float8_e4m3fn"; exit 0; fi
out=$(WSYNC_QUANT_DUMP=$TMP "$BIN" 2>&1)
if grep -q "^SKIP kernel_equals_host" <<<"$out"; then skip quant_torch "$(grep '^SKIP kernel_equals_host' <<<"$out")"; exit 0; fi
for form in fp32 ue8m0; do
    r=$($PY - "$TMP/quant_$form.bin" $form <<'PY' 2>&1
import sys, torch
path, ue8m0 = sys.argv[1], sys.argv[2] == "ue8m0"
raw = open(path, "rb").read()
nl = raw.index(b"\n"); R, C = map(int, raw[:nl].split()); p = nl + 1
x = torch.frombuffer(bytearray(raw[p:p + 2 * R * C]), dtype=torch.bfloat16).reshape(R, C).float(); p += 2 * R * C
q = torch.frombuffer(bytearray(raw[p:p + R * C]), dtype=torch.uint8).reshape(R, C); p += R * C
sr, sc = (R + 127) // 128, (C + 127) // 128
s = torch.frombuffer(bytearray(raw[p:p + 4 * sr * sc]), dtype=torch.float32).reshape(sr, sc)
want_s = torch.empty(sr, sc); want_q = torch.empty(R, C, dtype=torch.uint8)
for i in range(sr):
    for j in range(sc):
        b = x[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
        amax = b.abs().max()
        k = torch.tensor(1.0) if amax == 0 else amax / 448.0
        if ue8m0 and amax != 0:
            m, e = torch.frexp(k)  # k = m * 2^e, m in [0.5, 1): the next power of two up unless k is one
            k = k if m == 0.5 else torch.ldexp(torch.tensor(1.0), e.float())
        want_s[i, j] = k
        want_q[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = (b / k).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)
if not torch.equal(s.view(torch.int32), want_s.view(torch.int32)):
    print("scales differ at", (s != want_s).nonzero()[:3].tolist()); sys.exit(1)
if not torch.equal(q, want_q):
    d = (q != want_q).nonzero()
    print("%d codes differ, first at %s: kernel %02x, torch %02x" % (len(d), d[0].tolist(), q[tuple(d[0])], want_q[tuple(d[0])])); sys.exit(1)
print("ok")
PY
)
    [ "$r" = ok ] && pass quant_kernel_equals_torch_float8_$form || fail quant_kernel_equals_torch_float8_$form "$r"
done
