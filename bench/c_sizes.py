#!/usr/bin/python3
"""Code and data size of kiln's generated C (--target c) on a Cortex-M4, built with -Os.

Usage: /usr/bin/python3 bench/c_sizes.py [--json] [--keep DIR] [--symbols] MODEL_DIR...
A MODEL_DIR holds what `kiln compile MODEL --target c --name NAME --out DIR` wrote: NAME.h, NAME.c,
NAME_params.c and NAME_kernels.h (every NAME.h/NAME.c pair in the folder is measured).

For each model it reports:
- model: the sections of NAME.o + NAME_params.o (arm-none-eabi-size -A, summed by kind: .text*,
  .rodata*, .data*, .bss*), compiled -Os -ffunction-sections -fdata-sections; that is the model's
  own footprint, with no C library in it.
- linked: a stub application that calls every API function (run, get_*_index, set_*, descriptor),
  linked with --gc-sections, minus the same link with an empty main and minus the stub's own
  code: the model's cost in a real image, including what it pulls from libm/libgcc (expf, strcmp, ...), listed
  separately as "library".
- attribution: the model objects compiled again with -fno-inline (at -Os, kernels and node
  functions used once are inlined into kiln_NAME_run, so their symbols vanish), every symbol sized
  with arm-none-eabi-nm -S and summed by kind:
    params    kiln_NAME_p_* (and all of NAME_params.o)
    kernels   kiln_k_* and every function or table NAME_kernels.h defines
    nodes     node_*
    api       kiln_NAME_run, kiln_NAME_get_input_index, kiln_NAME_get_output_index,
              kiln_NAME_set_input, kiln_NAME_set_output, kiln_NAME_descriptor
    metadata  the other named objects of NAME.c (tensor infos, dims)
    unnamed   bytes of NAME.c in no symbol: string literals (tensor names), alignment
  runtime = nodes + api + metadata + unnamed: what the generated runtime adds beyond kernels and
  parameters. The -fno-inline total differs a little from the -Os one; both are printed.
The workspace (KILN_NAME_WORKSPACE_SIZE) is the application's memory and is reported on its own.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

CC = "arm-none-eabi-gcc"
TARGET = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Os",
          "-ffunction-sections", "-fdata-sections", *TARGET]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STARTUP = os.path.join(ROOT, "tests", "cortex_m4", "startup.c")
LDFLAGS = ["--specs=rdimon.specs", "-Wl,--gc-sections", "-Wl,--section-start=.kiln_vectors=0x0"]
KINDS = ["text", "rodata", "data", "bss"]
API = ["run", "get_input_index", "get_output_index", "set_input", "set_output", "descriptor"]


def sh(cmd, cwd=None):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed:\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def section_kind(name, linked):
    """Which of text/rodata/data/bss an allocated section counts as (None: not loaded)."""
    if name.startswith(".text") or (linked and name in (".init", ".fini")):
        return "text"
    if name.startswith(".rodata") or (linked and name in (".ARM.exidx", ".eh_frame")):
        return "rodata"
    if name.startswith(".data") or (linked and name in (".init_array", ".fini_array")):
        return "data"
    if name.startswith(".bss") or name == "COMMON":
        return "bss"
    return None


def section_sizes(files, linked=False):
    total = dict.fromkeys(KINDS, 0)
    for f in files:
        for line in sh(["arm-none-eabi-size", "-A", f]).splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1].isdigit():
                kind = section_kind(parts[0], linked)
                if kind:
                    total[kind] += int(parts[1])
    return total


def symbols(path):
    """(name, size, kind) of every sized symbol path defines; kind from the nm type letter."""
    out = []
    for line in sh(["arm-none-eabi-nm", "-S", "--defined-only", path]).splitlines():
        parts = line.split()
        if len(parts) != 4:
            continue  # no size
        t = parts[2].lower()
        kind = {"t": "text", "r": "rodata", "d": "data", "b": "bss", "c": "bss"}.get(t)
        if kind:
            out.append((parts[3], int(parts[1], 16), kind))
    return out


def kernel_names(kernels_h):
    """Functions and tables a kernels header defines (static functions need not say kiln_k_)."""
    if not os.path.exists(kernels_h):
        return set()
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", open(kernels_h).read(), flags=re.S)
    names = set(re.findall(r"^\s*(?:static\s|inline\s|extern\s)[^;{}=]*?\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*\{",
                           text, flags=re.M))
    names |= set(re.findall(r"^\s*static\s[^;{}()=]*?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)+=", text,
                            flags=re.M))
    return names


def classify(name, in_params, model, kernels):
    base = name.split(".")[0]  # gcc clones: foo.constprop.0, foo.isra.0, foo.part.0, foo.cold
    if in_params or base.startswith("kiln_%s_p_" % model):
        return "params"
    if base.startswith("kiln_k_") or base in kernels:
        return "kernels"
    # Portable kernels are named kiln_<file>_*; the model's own symbols kiln_<model>_*.
    if base.startswith("kiln_") and not base.startswith("kiln_%s_" % model):
        return "kernels"
    # Node functions, their tables (node_*_map) and their function-local constant tables
    # (gcc names those "<var>.<n>", e.g. the shape arguments a node passes to its kernel).
    if base.startswith("node_") or (name != base and name.split(".")[-1].isdigit() and not base.startswith("kiln_")):
        return "nodes"
    if base in ["kiln_%s_%s" % (model, a) for a in API]:
        return "api"
    return "metadata"


STUB = """#include <stdint.h>
#include "{name}.h"
static struct kiln_{name}_inputs in;
static struct kiln_{name}_outputs out;
static struct kiln_{name}_workspace ws;
int main(int argc, char **argv) {{
  int32_t r = kiln_{name}_set_input(&in, kiln_{name}_get_input_index(argv[0]), argv[1]);
  r += kiln_{name}_set_output(&out, kiln_{name}_get_output_index(argv[0]), argv[2]);
  ws.arena = (uint8_t *)argv[3];
  r += kiln_{name}_run(&in, &out, &ws);
  return (int)r + (argc > 4 ? (int)(uintptr_t)&kiln_{name}_descriptor : 0);
}}
"""
EMPTY = "int main(int argc, char **argv) { (void)argv; return argc; }\n"


def workspace_size(header, model):
    m = re.search(r"#define\s+KILN_%s_WORKSPACE_SIZE\s+\(?\s*(\d+)" % re.escape(model.upper()),
                  open(header).read())
    return int(m.group(1)) if m else None


def measure(model_dir, model, work, want_symbols):
    d = os.path.abspath(model_dir)
    srcs = [os.path.join(d, model + ".c"), os.path.join(d, model + "_params.c")]
    srcs = [s for s in srcs if os.path.exists(s)]
    inc = ["-I", d]
    res = {"dir": model_dir, "name": model,
           "workspace_bytes": workspace_size(os.path.join(d, model + ".h"), model)}

    # The model's own objects, as an application would build them.
    objs = []
    for s in srcs:
        o = os.path.join(work, os.path.basename(s)[:-2] + ".o")
        sh([CC, *CFLAGS, *inc, "-c", s, "-o", o])
        objs.append(o)
    res["model"] = section_sizes(objs)

    # Linked into a stub that calls every API function, against an empty application.
    stub, empty = os.path.join(work, "stub.c"), os.path.join(work, "empty.c")
    open(stub, "w").write(STUB.format(name=model))
    open(empty, "w").write(EMPTY)
    stub_o, empty_o = stub[:-2] + ".o", empty[:-2] + ".o"
    sh([CC, *CFLAGS, *inc, "-c", stub, "-o", stub_o])
    sh([CC, *CFLAGS, "-c", empty, "-o", empty_o])
    elf, base = os.path.join(work, "stub.elf"), os.path.join(work, "empty.elf")
    sh([CC, *CFLAGS, *LDFLAGS, stub_o, *objs, STARTUP, "-lm", "-o", elf])
    sh([CC, *CFLAGS, *LDFLAGS, empty_o, STARTUP, "-lm", "-o", base])
    a, b = section_sizes([elf], linked=True), section_sizes([base], linked=True)
    sa, sb = section_sizes([stub_o]), section_sizes([empty_o])  # the stub's own calls
    res["linked"] = {k: a[k] - b[k] - (sa[k] - sb[k]) for k in KINDS}
    model_syms = {n for n, _, _ in symbols(stub_o)}
    for o in objs:
        model_syms |= {n for n, _, _ in symbols(o)}
    base_syms = {n for n, _, _ in symbols(base)}
    lib = [(n, s) for n, s, _ in symbols(elf)
           if n not in base_syms and n not in model_syms and n not in ("main",)]
    res["library_bytes"] = sum(s for _, s in lib)
    if want_symbols:
        res["library_symbols"] = sorted(lib, key=lambda x: -x[1])

    # Attribution, without inlining so that kernels and node functions keep their symbols.
    kernels = kernel_names(os.path.join(d, model + "_kernels.h"))
    by = dict.fromkeys(["params", "kernels", "nodes", "api", "metadata", "unnamed"], 0)
    detail = []
    total_noinline = dict.fromkeys(KINDS, 0)
    for s in srcs:
        o = os.path.join(work, os.path.basename(s)[:-2] + ".noinline.o")
        sh([CC, *CFLAGS, "-fno-inline", *inc, "-c", s, "-o", o])
        in_params = s.endswith("_params.c")
        sec = section_sizes([o])
        named = dict.fromkeys(KINDS, 0)
        for n, size, kind in symbols(o):
            c = classify(n, in_params, model, kernels)
            by[c] += size
            named[kind] += size
            detail.append((n, size, kind, c))
        rest = sum(sec[k] - named[k] for k in KINDS)
        by["params" if in_params else "unnamed"] += rest
        for k in KINDS:
            total_noinline[k] += sec[k]
    res["attribution"] = by
    res["attribution_total"] = sum(total_noinline.values())
    res["runtime_bytes"] = by["nodes"] + by["api"] + by["metadata"] + by["unnamed"]
    if want_symbols:
        res["symbols"] = sorted(detail, key=lambda x: (x[3], -x[1]))
    return res


def models_in(folder):
    found = []
    for h in sorted(glob.glob(os.path.join(folder, "*.h"))):
        name = os.path.basename(h)[:-2]
        if not name.endswith("_kernels") and os.path.exists(os.path.join(folder, name + ".c")):
            found.append(name)
    return found


def print_report(r, want_symbols):
    def row(label, s):
        return "  %-34s %9d %9d %9d %9d %9d" % (label, s["text"], s["rodata"], s["data"], s["bss"],
                                              sum(s.values()))
    print("%s (%s)" % (r["name"], r["dir"]))
    print("  %-34s %9s %9s %9s %9s %9s" % ("bytes, -Os", "text", "rodata", "data", "bss", "total"))
    print(row("model objects", r["model"]))
    print(row("linked, minus an empty app", r["linked"]))
    a = r["attribution"]
    print("  library pulled in (libc, libm, libgcc): %d" % r["library_bytes"])
    print("  attribution (-fno-inline, %d in all): params %d, kernels %d, nodes %d, api %d, "
          "metadata %d, unnamed %d" % (r["attribution_total"], a["params"], a["kernels"],
                                       a["nodes"], a["api"], a["metadata"], a["unnamed"]))
    print("  runtime beyond kernels and parameters: %d" % r["runtime_bytes"])
    ws = r["workspace_bytes"]
    print("  workspace (application's): %s" % (ws if ws is not None else "unknown"))
    if want_symbols:
        for n, size, kind, c in r["symbols"]:
            print("    %-9s %-7s %8d  %s" % (c, kind, size, n))
        for n, size in r["library_symbols"]:
            print("    %-9s %-7s %8d  %s" % ("library", "", size, n))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+", metavar="MODEL_DIR")
    ap.add_argument("--json", action="store_true", help="one JSON list on stdout")
    ap.add_argument("--symbols", action="store_true", help="list every symbol and its kind")
    ap.add_argument("--keep", metavar="DIR", help="keep the objects and ELFs in DIR/NAME/")
    args = ap.parse_args()
    if shutil.which(CC) is None:
        sys.exit("c_sizes: %s not found (Debian: gcc-arm-none-eabi libnewlib-arm-none-eabi)" % CC)
    results, failed = [], 0
    for folder in args.dirs:
        names = models_in(folder)
        if not names:
            print("c_sizes: %s: no NAME.h + NAME.c" % folder, file=sys.stderr)
            failed += 1
        for name in names:
            work = tempfile.mkdtemp(prefix="c_sizes.")
            try:
                r = measure(folder, name, work, args.symbols)
            except RuntimeError as e:
                print("c_sizes: %s/%s: %s" % (folder, name, e), file=sys.stderr)
                failed += 1
                continue
            finally:
                if args.keep:
                    dst = os.path.join(args.keep, name)
                    shutil.rmtree(dst, ignore_errors=True)
                    shutil.copytree(work, dst)
                shutil.rmtree(work, ignore_errors=True)
            results.append(r)
            if not args.json:
                print_report(r, args.symbols)
    if args.json:
        json.dump(results, sys.stdout, indent=1)
        print()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
