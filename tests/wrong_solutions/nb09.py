"""Wrong answers to notebook 09's exercises: 32-bit elements assumed, stores or comments counted, opcodes
matched as substrings or with their modifiers, predicated instructions missed, vector widths ignored."""

from __future__ import annotations

import re

from exercises import nb09 as ex
from solutions import nb09 as sol


def widest_assumes_32_bit(ptx):
    widths = [4 if ".v4" in l else 2 if ".v2" in l else 1 for l in ptx.splitlines()
              if "ld.global" in l.split("//")[0]]
    return 32 * max(widths, default=0)                        # BUG: every element taken as 32 bits


def widest_counts_stores(ptx):
    best = 0
    for line in ptx.splitlines():
        m = re.search(r"\b(?:ld|st)\.global((?:\.[\w:]+)*)\.[bfus](8|16|32|64)\b", line.split("//")[0])  # BUG: st too
        if m:
            v = re.search(r"\.v([24])\b", m.group(1))
            best = max(best, (int(v.group(1)) if v else 1) * int(m.group(2)))
    return best


def widest_reads_comments(ptx):
    best = 0
    for line in ptx.splitlines():                             # BUG: a commented-out load counts too
        m = re.search(r"\bld\.global((?:\.[\w:]+)*)\.[bfus](8|16|32|64)\b", line)
        if m:
            v = re.search(r"\.v([24])\b", m.group(1))
            best = max(best, (int(v.group(1)) if v else 1) * int(m.group(2)))
    return best


def count_substring(sass, opcode):
    return sum(opcode in line for line in sass.splitlines() if line.strip().startswith("/*"))   # BUG: LDG in LDGSTS


def count_without_predicates(sass, opcode):
    return sum(line.split("*/", 1)[1].split()[0].split(".")[0] == opcode   # BUG: "@P0" is taken as the opcode
               for line in sass.splitlines() if line.strip().startswith("/*") and line.split("*/", 1)[1].split())


def count_with_modifiers(sass, opcode):
    count = 0
    for line in sass.splitlines():
        if line.strip().startswith("/*"):
            words = [w for w in line.split("*/", 1)[1].split() if not w.startswith("@")]
            count += bool(words) and words[0] == opcode        # BUG: LDG.E.128 is not "LDG"
    return count


def bytes_ignores_vectors(ptx):
    total = 0
    for line in ptx.splitlines():
        m = re.search(r"\bld\.global(?:\.[\w:]+)*\.[bfus](8|16|32|64)\b", line.split("//")[0])
        total += int(m.group(1)) // 8 if m else 0            # BUG: a v4 load moves 4 elements, not 1
    return total


def bytes_four_per_load(ptx):
    return 4 * sum("ld.global" in line.split("//")[0] for line in ptx.splitlines())  # BUG: 4 bytes per load


def bytes_counts_shared(ptx):
    total = 0
    for line in ptx.splitlines():
        m = re.search(r"\bld\.(?:global|shared)((?:\.[\w:]+)*)\.[bfus](8|16|32|64)\b", line.split("//")[0])  # BUG
        if m:
            v = re.search(r"\.v([24])\b", m.group(1))
            total += (int(v.group(1)) if v else 1) * int(m.group(2)) // 8
    return total


WRONG = [
    (ex.WIDEST_LOAD, "32-bit elements assumed", widest_assumes_32_bit, ["returned", "expected"]),
    (ex.WIDEST_LOAD, "stores counted", widest_counts_stores, ["st.global", "returned"]),
    (ex.WIDEST_LOAD, "comments read", widest_reads_comments, ["//", "returned"]),
    (ex.COUNT_OPCODE, "substring match", count_substring, ["opcode=", "returned"]),
    (ex.COUNT_OPCODE, "predicates not skipped", count_without_predicates, ["opcode=", "returned"]),
    (ex.COUNT_OPCODE, "modifiers kept", count_with_modifiers, ["returned", "expected"]),
    (ex.LOAD_BYTES, "vector width ignored", bytes_ignores_vectors, ["returned", "expected"]),
    (ex.LOAD_BYTES, "4 bytes per load", bytes_four_per_load, ["returned", "expected"]),
    (ex.LOAD_BYTES, "shared loads counted", bytes_counts_shared, ["returned", "expected"]),
]


# ---- drawn from the grader's input families and invariants ------------------------------------------------
def widest_no_default(ptx):
    return max(sol.widest_load_bits(line) for line in ptx.splitlines())   # BUG: max() of nothing: ValueError


def widest_vector_right_after(ptx):
    best = 0
    for line in ptx.splitlines():
        m = re.search(r"\bld\.global(\.v[24])?(?:\.[\w:]+)*\.[bfus](8|16|32|64)\b", line.split("//", 1)[0])
        if m:                                               # BUG: .v4 only right after ld.global, not after
            best = max(best, (int(m.group(1)[2]) if m.group(1) else 1) * int(m.group(2)))  # cache qualifiers
    return best


def bytes_none_when_empty(ptx):
    total = sol.load_bytes_per_thread(ptx)
    return total or None                                    # BUG: None, not 0, when there is no load


def bytes_in_bits(ptx):
    return sol.load_bytes_per_thread(ptx) * 8               # BUG: bits, not bytes


def count_first_word(sass, opcode):
    count = 0
    for line in sass.splitlines():
        words = line.split()
        count += len(words) > 1 and words[1].split(".")[0] == opcode   # BUG: the word after the address: a
    return count                                                        # predicate (@P0) hides the opcode


def count_uniform_predicates_kept(sass, opcode):
    count = 0
    for line in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s*(?:@!?P\w+\s+)?([A-Z0-9_@!]+)", line)  # BUG: @UP0 not a predicate
        count += bool(m) and m.group(1) == opcode
    return count


WRONG += [
    (ex.WIDEST_LOAD, "max() of no loads", widest_no_default, ["raised ValueError", "max()", "empty"]),
    (ex.WIDEST_LOAD, ".v4 only right after ld.global", widest_vector_right_after, ["returned", "expected"]),
    (ex.LOAD_BYTES, "None without loads", bytes_none_when_empty, ["returned None, expected 0"]),
    (ex.LOAD_BYTES, "bits, not bytes", bytes_in_bits, ["returned", "expected"]),
    (ex.COUNT_OPCODE, "the word after the address", count_first_word, ["returned", "expected"]),
    (ex.COUNT_OPCODE, "uniform predicates kept", count_uniform_predicates_kept, ["@UP0", "returned"]),
]
