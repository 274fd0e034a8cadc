"""Wrong answers to notebook 04's exercises: an FMA counted as one FLOP, 2-byte values, naive traffic; banks
of 16 or words counted twice; waves rounded down or a last wave taken as empty; and rung-4 twins that drop
the K tail, keep accumulators across blocks or read the B tile transposed (C++ sources, built by the test)."""

from __future__ import annotations

import math

from exercises import nb04 as ex
from solutions import nb04 as sol


def intensity_fma_one_flop(bm, bn):
    return bm * bn / (4 * (bm + bn))                    # BUG: a multiply-add is 2 FLOPs


def intensity_fp16_bytes(bm, bn):
    return 2 * bm * bn / (2 * (bm + bn))                # BUG: FP32 values are 4 bytes


def intensity_naive(bm, bn):
    return 2 * bm * bn / (4 * 2 * bm * bn)              # BUG: one load per operand of every FMA: no reuse


def wavefronts_16_banks(pitch, q=0):
    words = {(4 * (lane % 2) + q) * pitch + lane // 2 for lane in range(32)}
    return max(sum(1 for w in words if w % 16 == b) for b in range(16))          # BUG: 32 banks, not 16


def wavefronts_every_lane(pitch, q=0):
    words = [(4 * (lane % 2) + q) * pitch + lane // 2 for lane in range(32)]   # BUG: a word twice is one access
    return max(sum(1 for w in words if w % 32 == b) for b in range(32))


def wavefronts_row_major(pitch, q=0):
    words = {(lane // 2) * pitch + 4 * (lane % 2) + q for lane in range(32)}     # BUG: As[r][c + q], not transposed
    return max(sum(1 for w in words if w % 32 == b) for b in range(32))


def waves_floor(m, n, bm, bn, blocks_per_sm, sms=132):
    blocks, slots = (m // bm) * (n // bn), blocks_per_sm * sms                   # BUG: partial tiles are blocks too
    rounds = max(1, math.ceil(blocks / slots))
    return rounds, (blocks - (rounds - 1) * slots) / slots


def waves_modulo(m, n, bm, bn, blocks_per_sm, sms=132):
    blocks, slots = math.ceil(m / bm) * math.ceil(n / bn), blocks_per_sm * sms
    return math.ceil(blocks / slots), (blocks % slots) / slots                    # BUG: a full last wave gives 0


def waves_plus_one(m, n, bm, bn, blocks_per_sm, sms=132):
    blocks, slots = math.ceil(m / bm) * math.ceil(n / bn), blocks_per_sm * sms
    rounds = blocks // slots + 1                                                   # BUG: one too many when exact
    return rounds, (blocks - (rounds - 1) * slots) / slots


def _variant(tag: str, twin: str = sol.RUNG4_TWIN) -> str:
    source = ex.RUNG4_WRAPPER + twin
    return source.replace("gemm_rung4", f"gemm_rung4_{tag}").replace("launch_rung4", f"launch_rung4_{tag}")


CPP = {
    "gemm_rung4_ref": _variant("ref"),
    "gemm_rung4_k_tail": _variant("k_tail", sol.RUNG4_TWIN.replace("k0 < K; k0 += BK", "k0 + BK <= K; k0 += BK")),
    "gemm_rung4_acc_kept": _variant("acc_kept", sol.RUNG4_TWIN.replace(
        "std::fill(&acc[0][0][0], &acc[0][0][0] + BM * BN, 0.f);", "").replace(
        "acc[BM / TM][BN][TM];", "acc[BM / TM][BN][TM] = {};")),
    "gemm_rung4_b_transposed": _variant("b_transposed", sol.RUNG4_TWIN.replace(
        "B[(k0 + r) * N + bn + cc]", "B[(bn + cc) * K + k0 + r]")),
}
assert len(set(CPP.values())) == len(CPP), "a replacement did not apply"

WRONG = [
    (ex.TILE_INTENSITY, "an FMA as one FLOP", intensity_fma_one_flop, ["bm=", "returned"]),
    (ex.TILE_INTENSITY, "2-byte values", intensity_fp16_bytes, ["returned", "expected"]),
    (ex.TILE_INTENSITY, "no reuse counted", intensity_naive, ["returned 0.25"]),
    (ex.STORE_WAVEFRONTS, "16 banks", wavefronts_16_banks, ["pitch=", "returned"]),
    (ex.STORE_WAVEFRONTS, "a word counted twice", wavefronts_every_lane, ["returned", "expected"]),
    (ex.STORE_WAVEFRONTS, "store not transposed", wavefronts_row_major, ["returned", "expected"]),
    (ex.WAVES, "partial tiles dropped", waves_floor, ["value", "returned"]),
    (ex.WAVES, "a full last wave counted as empty", waves_modulo, ["busy share", "returned 0.0, expected 1.0"]),
    (ex.WAVES, "one wave too many", waves_plus_one, ["rounds", "returned"]),
    (ex.RUNG4, "K tail dropped", "cpp:gemm_rung4_k_tail", ["values wrong"]),
    (ex.RUNG4, "accumulators kept across blocks", "cpp:gemm_rung4_acc_kept", ["values wrong"]),
    (ex.RUNG4, "B tile read transposed", "cpp:gemm_rung4_b_transposed", ["values wrong"]),
]


# ---- drawn from the grader's input families and invariants ------------------------------------------------
def intensity_int_division(bm, bn):
    return 2 * bm * bn // (4 * (bm + bn))              # BUG: integer division: 0 for bm = bn = 1


def intensity_square_only(bm, bn):
    return 2 * bm * bm / (4 * 2 * bm)                  # BUG: assumes bn == bm


def wavefronts_words_not_banks(pitch, q=0):
    words = {(4 * (lane % 2) + q) * pitch + lane // 2 for lane in range(32)}
    return 32 // len({w % 32 for w in words})          # BUG: distinct banks, not the busiest bank's words


def wavefronts_pitch_mod_32(pitch, q=0):
    if pitch % 32 == 0:                                 # BUG: a special case that forgets q and the halves
        return 16
    return sol.transposed_store_wavefronts(pitch, q)


def waves_slots_ignored(m, n, bm, bn, blocks_per_sm, sms=132):
    blocks = math.ceil(m / bm) * math.ceil(n / bn)
    rounds = math.ceil(blocks / sms)                    # BUG: blocks_per_sm ignored
    return rounds, (blocks - (rounds - 1) * sms) / sms


def waves_zero_for_small(m, n, bm, bn, blocks_per_sm, sms=132):
    blocks, slots = math.ceil(m / bm) * math.ceil(n / bn), blocks_per_sm * sms
    return blocks // slots, (blocks % slots) / slots    # BUG: less than a wave is 0 rounds


CPP.update({
    # BUG: the block loop over M stops after the first block row (bm < BM): M > 64 is left unwritten
    "gemm_rung4_first_block_row": _variant("first_block_row", sol.RUNG4_TWIN.replace(
        "bm < M; bm += BM", "bm < std::min<int64_t>(M, BM); bm += BM")),
    # BUG: the A tile's K tail is not zero-padded: it reads the next row's first values (and past the end)
    "gemm_rung4_a_tail_unmasked": _variant("a_tail_unmasked", sol.RUNG4_TWIN.replace(
        "(bm + r < M && k0 + cc < K) ?", "(bm + r < M) ?")),
})
assert len(set(CPP.values())) == len(CPP), "a replacement did not apply"

WRONG += [
    (ex.TILE_INTENSITY, "integer division", intensity_int_division, ["bm=1, bn=1", "returned 0"]),
    (ex.TILE_INTENSITY, "square tiles assumed", intensity_square_only, ["returned", "expected"]),
    (ex.STORE_WAVEFRONTS, "distinct banks counted", wavefronts_words_not_banks, ["pitch=", "returned"]),
    (ex.STORE_WAVEFRONTS, "pitch 32 special-cased", wavefronts_pitch_mod_32, ["returned 16"]),
    (ex.WAVES, "blocks per SM ignored", waves_slots_ignored, ["busy share", "returned"]),
    (ex.WAVES, "less than a wave is no round", waves_zero_for_small,
     ["rounds (the 1st value you returned)", "returned 0, expected 1"]),
    (ex.RUNG4, "first block row only", "cpp:gemm_rung4_first_block_row", ["values wrong"]),
    (ex.RUNG4, "A's K tail not padded", "cpp:gemm_rung4_a_tail_unmasked", ["values wrong"]),
]
