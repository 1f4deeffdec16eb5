#!/usr/bin/env python3
"""Checks that every folder of src/ includes only the folders below it (docs/architecture.md).

Each folder lists the folders whose headers it may include besides its own; a header named in
EXCEPTIONS may include those headers too. The CMake targets link the same way, but every target
sees all of src/ on its include path, so only this check stops a header-only step upward.
Usage: scripts/check_layers.py [repository root]
"""
import pathlib
import re
import sys

BELOW = {
    "support": [],
    "ir": ["support"],
    "frontend": ["ir", "support"],
    "kernels/reference": [],
    "kernels/x86": ["kernels/reference", "ir", "support"],
    "kernels/dnnl": ["kernels/x86", "ir", "support"],
    "ops": ["kernels", "ir", "support"],
    "passes": ["ops", "ir", "support"],
    "planner": ["ops/op_traits.h", "ir", "support"],
    "compiler": ["passes", "planner", "ops", "ir", "support"],
    "runtime": ["compiler", "passes", "planner", "ops", "kernels", "ir", "support"],
    "codegen/c": ["compiler", "passes", "planner", "ops", "kernels/reference", "ir", "support"],
    "codegen/cuda": ["codegen/c", "compiler", "passes", "planner", "ops", "ir", "support"],
    "bundle": ["planner", "ir", "support"],
    "quantize": ["runtime", "bundle", "frontend", "ir", "support"],
    "gym": ["runtime", "codegen/c", "compiler", "passes", "planner", "frontend", "ops", "ir",
            "support"],
    "cli": None,  # the top: it may include anything
}
# The reference convolution's geometry from an op's plan: the one reference header that reads
# an op definition, for the host glue and the C emitters (not for the kernels themselves).
EXCEPTIONS = {"kernels/reference/conv_shape_of.h": ["ops/conv_geometry.h"]}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(rel):
    parts = rel.split("/")
    for depth in (2, 1):
        name = "/".join(parts[:depth])
        if name in BELOW:
            return name
    return None


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve() / "src"
    bad = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cc", ".c"):
            continue
        rel = path.relative_to(root).as_posix()
        folder = folder_of(rel)
        if folder is None:
            bad.append(f"src/{rel}: in no known folder (add it to scripts/check_layers.py)")
            continue
        allowed = BELOW[folder]
        if allowed is None:
            continue
        allowed = [folder] + allowed + EXCEPTIONS.get(rel, [])
        for inc in INCLUDE.findall(path.read_text(errors="replace")):
            if "/" not in inc:
                continue  # a file of the same folder, or a generated header beside it
            if not any(inc == a or inc.startswith(a + "/") for a in allowed):
                bad.append(f"src/{rel} includes {inc}, above {folder}")
    for line in bad:
        print(line)
    print(f"check_layers: {len(bad)} includes out of order" if bad else "check_layers: ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
