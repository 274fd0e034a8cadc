"""Solutions of notebook 09's exercises: facts read off PTX and SASS text."""

from __future__ import annotations

import re

# ld.global, then qualifiers (.nc, .L1::evict_last, .v4 ...), then the type: .b32, .f16, .u8 ...
_LOAD = re.compile(r"\bld\.global((?:\.[\w:]+)*)\.[bfus](8|16|32|64)\b")


def _load_bits(ptx: str) -> list[int]:
    bits = []
    for line in ptx.splitlines():
        code = line.split("//", 1)[0]                    # a comment is not an instruction
        match = _LOAD.search(code)
        if match:
            vector = re.search(r"\.v([24])\b", match.group(1))
            bits.append((int(vector.group(1)) if vector else 1) * int(match.group(2)))
    return bits


# ---- Exercise 1 -------------------------------------------------------------------------------------------
def widest_load_bits(ptx: str) -> int:
    return max(_load_bits(ptx), default=0)


# ---- Exercise 2 -------------------------------------------------------------------------------------------
def count_opcode(sass: str, opcode: str) -> int:
    count = 0
    for line in sass.splitlines():
        line = line.strip()
        if not line.startswith("/*"):
            continue                                     # headers ("Function : ..."), not instructions
        words = line.split("*/", 1)[1].split()
        if words and words[0].startswith("@"):
            words = words[1:]                            # a predicate guard such as @P0 or @!P1
        if words and words[0].split(".")[0] == opcode:
            count += 1
    return count


# ---- Exercise 3 -------------------------------------------------------------------------------------------
def load_bytes_per_thread(ptx: str) -> int:
    return sum(_load_bits(ptx)) // 8
