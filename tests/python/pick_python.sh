# pick_python.sh (sourced): sets PY to the first interpreter that imports
# torch (and, with NEED_CUDA=1, sees a CUDA device): $WSYNC_PYTHON, python3 on
# PATH, torch's venv on the GPU host, Debian's /usr/bin/python3. Empty if none.
PY=
for cand in ${WSYNC_PYTHON:-} python3 /opt/torch/.venv/bin/python /usr/bin/python3; do
    command -v "$cand" >/dev/null 2>&1 || continue
    if [ "${NEED_CUDA:-0}" = 1 ]; then
        "$cand" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null || continue
    else
        "$cand" -c 'import torch' 2>/dev/null || continue
    fi
    PY=$cand; break
done
