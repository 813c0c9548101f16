#!/bin/bash
# tests/gpu/devbuild.sh NAME: a stripped copy of ./build in ./devbuild/NAME/build for the GPU host
# (the wsync binary, libwsync.so, tests/gpu, tests/tools, the benches named in
# BENCHES (default: gpu_delta_bench gpu_delta_phases_bench tp_e2e_bench), device-libs) and devbuild/NAME/run.sh's preamble.
# Run from the repository root after `make all all-tests` (and `make build/bench/X` for the benches
# named). The device tool sends the session's own checkout: build there, not in another worktree.
# Then call the device with command `bash devbuild/NAME/run.sh` (after appending your commands to it:
# they run from the repository root, the build at $B, e.g. `WSYNC_ONLY=gpu tests/run.sh $B`) and
# carry ["devbuild/NAME"]; the GPU host's limit is 64 MiB for the tree and what is carried.
# Right before the call, tests/gpu/devcheck.sh NAME says whether the folder is ready (libraries staged,
# run.sh with commands, the binaries it names there, under 64 MiB with the tree).
# WSYNC_STAGE names the development machine's staging script (it copies the runtime libraries the
# GPU host lacks, and an env.sh, into build/device-libs).
set -euo pipefail
name=${1:?usage: tests/gpu/devbuild.sh NAME}
stage=${WSYNC_STAGE:?set WSYNC_STAGE to the staging script of the GPU host (it writes build/device-libs)}
d=devbuild/$name/build
rm -rf devbuild/$name && mkdir -p $d/bench $d/tests
cp build/wsync build/libwsync.so $d/
cp -r build/tests/gpu build/tests/tools $d/tests/
cp -r build/gen $d/ 2>/dev/null || true
for b in ${BENCHES:-gpu_delta_bench gpu_delta_phases_bench tp_e2e_bench}; do cp build/bench/$b $d/bench/; done
find $d -type f -perm -u+x -exec strip --strip-debug {} + 2>/dev/null || true
strip --strip-debug $d/libwsync.so
mkdir -p $d/device-libs
# The staging script may exit non-zero after writing everything (a closed pipe in it: 141): what
# counts is what it wrote. (Joined with &&, its failure skipped the copy and set -e let it pass: a
# folder without its libraries, that the device runs for nothing.)
mkdir -p build/device-libs
bash "$stage" >/dev/null || echo "devbuild: $stage exited $?; checking what it wrote" >&2
test -f build/device-libs/env.sh || { echo "devbuild: $stage wrote no build/device-libs/env.sh" >&2; exit 1; }
cp -r build/device-libs/* $d/device-libs/
cat > devbuild/$name/run.sh <<'EOR'
#!/bin/bash
# sourced preamble: B = the build, then the caller's commands run from the repository root
cd "$(dirname "$0")"
source build/device-libs/env.sh
B=$PWD/build
export LD_LIBRARY_PATH=$B:$LD_LIBRARY_PATH WSYNC_BIN=$B/wsync WSYNC_BUILD=$B
cd ../..
export WSYNC_ROOT=$PWD
B=${B#$PWD/}
EOR
du -sh devbuild/$name
