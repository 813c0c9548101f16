#!/usr/bin/env python3
"""tree_check.py [layers|sizes] [root]: checks the shape of the source tree and exits 1,
naming each file that breaks a rule:

  layers     a file may include its own folder's headers and those of lower
             layers (LAYERS, lowest first); a lower layer including a higher
             one, or two folders of one layer including each other, fails;
             so does a file in cli/ including another folder's *_internal.h
             (the command line uses the public API, or a small header made
             for it such as engine_side/receiver_cli.h);
  files      no source file over 600 lines (in every folder above, and in
             bench/, tests/, python/ and examples/: C, CUDA, Python, shell);
  functions  no function over 120 lines (from its name's line to its closing
             brace) in common/, engine_side/, trainer_side/ and cli/.

Folders not in LAYERS (tests/, bench/, examples/, python/) may include
anything. With `layers` or `sizes`, only that rule. Prints one line per rule with its count, then "tree ok" or the
faults.
"""
import os
import re
import sys

# Lowest first; folders on one line are one layer (they may not include each other).
LAYERS = [
    ["common"],  # common/wsync.h, the public types every layer uses
    ["common/base"],
    ["common/digest", "common/net", "common/cost", "common/quant"],
    ["common/mem", "common/model"],
    ["common/pack", "common/window", "common/targets", "common/delta"],
    ["common/transport"],
    ["common/proto"],
    ["common/control"],
    ["engine_side", "trainer_side"],
    ["cli"],
]
CHECKED = ("common", "engine_side", "trainer_side", "cli")
# Held to the file-size rule only: tests, benchmarks and examples read whole too.
OTHER = ("bench", "tests", "python", "examples")
OTHER_EXT = (".c", ".h", ".cu", ".cuh", ".py", ".sh")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 120
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# A function definition's first line: at column 0, a name and "(", no ";".
FUNC_START = re.compile(r"^[A-Za-z_][^;{}()=]*\b([A-Za-z_]\w*)\s*\(")

RANK = {folder: i for i, layer in enumerate(LAYERS) for folder in layer}


def folder_of(path):
    """The layer folder a repository path belongs to, or None."""
    d = os.path.dirname(path)
    while d:
        if d in RANK:
            return d
        d = os.path.dirname(d)
    return None


def walk(root, tops, exts):
    for top in tops:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for n in sorted(names):
                if n.endswith(exts):
                    yield os.path.relpath(os.path.join(dirpath, n), root)


def sources(root):
    return walk(root, CHECKED, SOURCE_EXT)


def file_lines(root, f, faults):
    """f's lines (no trailing empty one); a fault when there are too many."""
    with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
        lines = fh.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) > MAX_FILE_LINES:
        faults.append(f"files: {f} has {len(lines)} lines (at most {MAX_FILE_LINES}): split it by concern")
    return lines


def check_other_files(root, faults):
    n = 0
    for f in walk(root, OTHER, OTHER_EXT):
        n += 1
        file_lines(root, f, faults)
    return n


def check_layers(root, files, faults):
    edges = {}
    for f in files:
        src = folder_of(f)
        if src is None:
            continue
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                dst = folder_of(m.group(1))
                if dst is None or dst == src:
                    continue
                if src == "cli" and m.group(1).endswith("_internal.h"):
                    faults.append(f"layers: {f}:{lineno}: #include \"{m.group(1)}\": the command line may not "
                                  f"include another folder's internals; use the public API or a small "
                                  f"header that says what the command line needs and why (as receiver_cli.h)")
                edges.setdefault((src, dst), []).append(f"{f}:{lineno}: #include \"{m.group(1)}\"")
    for (src, dst), where in sorted(edges.items()):
        if RANK[dst] > RANK[src]:
            for w in where:
                faults.append(f"layers: {w}: {src}/ (layer {RANK[src]}) includes the higher layer {dst}/ "
                              f"(layer {RANK[dst]}); move the shared part down or invert the call")
        elif RANK[dst] == RANK[src]:
            for w in where:
                faults.append(f"layers: {w}: {src}/ and {dst}/ are one layer and may not include each other; "
                              f"move the shared part into a lower folder")
    return len(edges)


def function_spans(lines):
    """(name, first line, last line) of each top-level function definition."""
    i, n = 0, len(lines)
    while i < n:
        m = FUNC_START.match(lines[i])
        if not m or lines[i].startswith(("typedef", "struct", "enum", "union", "#", "static const", "extern")):
            i += 1
            continue
        j = i
        while j < n and not lines[j].startswith("{") and ";" not in lines[j] and j - i < 12:
            j += 1
        if j >= n or not lines[j].startswith("{"):
            i += 1
            continue
        k = j + 1
        while k < n and not lines[k].startswith("}"):
            k += 1
        yield m.group(1), i + 1, k + 1
        i = k + 1


def check_sizes(root, files, faults):
    nfunc = 0
    for f in files:
        lines = file_lines(root, f, faults)
        for name, first, last in function_spans(lines):
            nfunc += 1
            if last - first + 1 > MAX_FUNCTION_LINES:
                faults.append(f"functions: {f}:{first}: {name}() has {last - first + 1} lines "
                              f"(at most {MAX_FUNCTION_LINES}): split it into steps")
    return nfunc


def main():
    args = sys.argv[1:]
    rules = {"layers", "sizes"}
    if args and args[0] in rules:
        rules = {args.pop(0)}
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), "..", ".."))
    files = list(sources(root))
    faults = []
    if "layers" in rules:
        nedges = check_layers(root, files, faults)
        print(f"layers: {len(files)} files, {nedges} folder-to-folder include edges")
    if "sizes" in rules:
        nfunc = check_sizes(root, files, faults)
        nother = check_other_files(root, faults)
        print(f"files and functions: {len(files)} files, {nfunc} functions; {nother} files of tests, "
              f"benchmarks and examples")
    for f in faults:
        print(f)
    if faults:
        print(f"tree: {len(faults)} faults")
        return 1
    print("tree ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
