#!/usr/bin/env python3
"""Checks a built executor library for wide instructions where they may run on any x86-64.

The library runs on the x86-64 baseline and calls AVX2 or AVX-512 kernels only where the processor
has them (executor/isa.hpp). That holds if every function whose code uses AVX, AVX2, FMA, BMI or
AVX-512 instructions is one of those kernels: in namespace avx2 or avx512, or local to the file
that compiled it for that set (internal linkage, so that no other file's call can reach it), and
is not a file's static initializer (which runs at start-up on every processor). A global or weak
function outside those namespaces with such code is the failure this looks for: an inline
function or template instantiation compiled for a wider set, which the linker may keep for the
whole program. AVX-512 code must moreover be in namespace avx512 or a file's local function.

Usage: isa_symbols_check.py LIBRARY.a  (exit 0: clean; 1: the offending functions are listed)
"""
import re
import subprocess
import sys

BMI = {"andn", "bextr", "blsi", "blsmsk", "blsr", "bzhi", "mulx", "pdep", "pext", "rorx", "sarx",
       "shlx", "shrx"}
AVX512_OPERAND = re.compile(r"%zmm|%k[0-7]\b|%[xy]mm(1[6-9]|2[0-9]|3[01])\b|\{1to\d+\}")


def wide(mnemonic, operands):
    """None, "avx" (VEX: AVX, AVX2, FMA; or BMI) or "avx512" (EVEX)."""
    if AVX512_OPERAND.search(operands):
        return "avx512"
    if mnemonic.startswith("v") or "%ymm" in operands or mnemonic in BMI:
        return "avx"
    return None


def bindings(library):
    """symbol -> nm's type letter (T/t/W/...) for the defined text symbols."""
    out = subprocess.run(["nm", "--defined-only", library], check=True, capture_output=True,
                         text=True).stdout
    kinds = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TtWw":
            kinds.setdefault(parts[2], set()).add(parts[1])
    return kinds


def functions(library):
    """(member, symbol, widest set used) for every function of every member."""
    dump = subprocess.run(["objdump", "-d", "--no-show-raw-insn", library], check=True,
                          capture_output=True, text=True).stdout
    member, symbol, level = None, None, None
    found = []
    for line in dump.splitlines():
        if m := re.match(r"^(\S+):\s+file format", line):
            member = m.group(1)
            continue
        if m := re.match(r"^[0-9a-f]+ <(.+)>:$", line):
            if symbol:
                found.append((member, symbol, level))
            symbol, level = m.group(1), None
            continue
        if symbol and (m := re.match(r"^\s+[0-9a-f]+:\s+(\S+)\s*(.*)$", line)):
            w = wide(m.group(1), m.group(2))
            if w == "avx512" or (w and level is None):
                level = w
    if symbol:
        found.append((member, symbol, level))
    return found


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), check=True, capture_output=True,
                         text=True).stdout
    return out.splitlines()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    library = sys.argv[1]
    kinds = bindings(library)
    wide_functions = [(m, s, lvl) for m, s, lvl in functions(library) if lvl]
    names = demangle([s for _, s, _ in wide_functions])
    bad = []
    for (member, symbol, level), name in zip(wide_functions, names):
        local = kinds.get(symbol, set()) <= {"t"}
        in_avx512 = "::avx512::" in name
        in_avx2 = "::avx2::" in name
        if "_GLOBAL__sub_I" in symbol or "__static_initialization" in name:
            bad.append(f"{member}: {name}: a static initializer with {level} instructions")
        elif level == "avx512" and not (in_avx512 or local):
            bad.append(f"{member}: {name}: AVX-512 instructions outside namespace avx512")
        elif not (in_avx2 or in_avx512 or local):
            bad.append(f"{member}: {name}: {level} instructions in a shared function")
    kernels = sum(1 for _, name in zip(wide_functions, names)
                  if "::avx2::" in name or "::avx512::" in name)
    if bad:
        print(f"{library}: {len(bad)} functions with wide instructions may run on any processor:")
        for b in bad:
            print("  " + b)
        sys.exit(1)
    if kernels == 0:
        sys.exit(f"{library}: no function of namespace avx2 or avx512 has wide instructions: "
                 "the kernels were not compiled for their instruction sets")
    print(f"{library}: {len(wide_functions)} functions with wide instructions, {kernels} of them "
          "in namespaces avx2 and avx512, the others local to a kernel's file")


if __name__ == "__main__":
    main()
