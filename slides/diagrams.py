"""Diagrams of the mechanisms the lectures teach, drawn by code for slides (see figures.py for the style
and the checks): one function per diagram, named in a deck as ``{{ diagram("matmul_tiles") }}``.

They draw what the lecture explains, not what a run measured: no figure here is a measurement.
Coordinates are slide pixels (the axes span the canvas, 1 unit = 1 px), so a 17-point label is 17 px.
"""

from __future__ import annotations

from figures import FONT, INK, Rendered, new_figure, render

BLUE, GREEN, ORANGE, GREY, RED, PURPLE = "#0b5fb0", "#2e8b57", "#e67e22", "#7f8c8d", "#c62828", "#8e44ad"
LIGHT = {"blue": "#d6e6f7", "green": "#d9f0e1", "orange": "#fbe3cc", "grey": "#eceff1", "red": "#f8d7d7",
         "purple": "#eadcf2"}
FS = FONT["note"]


def canvas(size: str = ""):
    fig = new_figure(size)
    ax = fig.add_axes([0, 0, 1, 1])
    width, height = fig.get_figwidth() * 72, fig.get_figheight() * 72
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    return fig, ax, width, height


def box(ax, x, y, w, h, text="", fc="#ffffff", ec=INK, fs=FS, weight="normal", color=INK, lw=1.6, ls="-",
        hatch=None, ha="center"):
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x, y), w, h, facecolor=fc, edgecolor=ec, linewidth=lw, linestyle=ls, hatch=hatch))
    if text:
        tx = x + w / 2 if ha == "center" else x + 8
        ax.text(tx, y + h / 2, text, ha=ha, va="center", fontsize=fs, fontweight=weight, color=color)


def label(ax, x, y, text, fs=FS, ha="left", va="center", color=INK, weight="normal"):
    ax.text(x, y, text, ha=ha, va=va, fontsize=fs, color=color, fontweight=weight)


def arrow(ax, x0, y0, x1, y1, color=INK, lw=2.0, style="-|>"):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                arrowprops=dict(arrowstyle=style, color=color, lw=lw, shrinkA=0, shrinkB=0, mutation_scale=18))


def lanes(ax, rows, x0, width, top, lane_h=44, gap=22, name_w=230, t_max=None):
    """A timeline: rows of (lane name, [(t0, t1, text, colour)]); time runs left to right."""
    t_max = t_max or max(t1 for _, items in rows for _, t1, _, _ in items)
    scale = (width - name_w) / t_max
    ys = []
    for i, (name, items) in enumerate(rows):
        y = top - (i + 1) * lane_h - i * gap
        ys.append(y)
        label(ax, x0, y + lane_h / 2, name, weight="bold")
        ax.plot([x0 + name_w, x0 + width], [y, y], color="#cfd8dc", lw=1)
        for t0, t1, text, colour in items:
            box(ax, x0 + name_w + t0 * scale, y + 3, (t1 - t0) * scale, lane_h - 6, text,
                fc=LIGHT.get(colour, colour), ec={"blue": BLUE, "green": GREEN, "orange": ORANGE, "grey": GREY,
                                                  "red": RED, "purple": PURPLE}.get(colour, INK))
    return ys, (lambda t: x0 + name_w + t * scale)


# --------------------------------------------------------------------------------------------------
# One diagram per lecture


def host_device_timeline() -> Rendered:
    """01: the host queues kernels and runs ahead; only a synchronize makes its clock wait for the GPU."""
    fig, ax, W, H = canvas()
    ys, at = lanes(ax, [("host (Python)", [(0, 1, "launch", "blue"), (1.2, 2.2, "launch", "blue"),
                                           (2.4, 3.4, "launch", "blue"), (3.6, 11, "synchronize(): waits", "grey")]),
                        ("GPU", [(0.6, 4.2, "kernel 1", "green"), (4.2, 7.6, "kernel 2", "green"),
                                 (7.6, 11, "kernel 3", "green")])],
                    x0=20, width=W - 40, top=H - 80, lane_h=60, gap=40, name_w=200, t_max=11.4)
    for t, text, colour in ((3.45, "clock read without synchronize", RED), (11.0, "clock read after synchronize", GREEN)):
        ax.plot([at(t), at(t)], [40, H - 60], color=colour, lw=2.5, ls="--")
        label(ax, at(t) - 6, 28 if colour == RED else H - 45, text, ha="right" if t > 5 else "left", color=colour,
              weight="bold")
    label(ax, 20, H - 30, "time →", color=GREY)
    return render(fig)


def gpu_idle_gaps() -> Rendered:
    """02: before the fix the GPU waits for the host's data; after it, kernels follow each other."""
    fig, ax, W, H = canvas("tall")
    rows = [("before: host", [(0, 3, "load + copy batch", "orange"), (3, 4.4, "launch step", "blue"),
                              (4.4, 7.4, "load + copy batch", "orange"), (7.4, 8.8, "launch step", "blue")]),
            ("before: GPU", [(0, 3.2, "idle", "grey"), (3.2, 4.8, "kernels", "green"), (4.8, 7.6, "idle", "grey"),
                             (7.6, 9.2, "kernels", "green")]),
            ("after: host", [(0, 1.4, "launch", "blue"), (1.4, 2.8, "launch", "blue"), (2.8, 4.2, "launch", "blue"),
                             (4.2, 5.6, "launch", "blue")]),
            ("after: GPU", [(0.3, 1.9, "kernels", "green"), (1.9, 3.5, "kernels", "green"),
                            (3.5, 5.1, "kernels", "green"), (5.1, 6.7, "kernels", "green")])]
    lanes(ax, rows, x0=20, width=W - 40, top=H - 50, lane_h=56, gap=34, name_w=190, t_max=9.4)
    label(ax, 20, H - 22, "time →  (the profiler's trace shows the same lanes, one row per thread and stream)",
          color=GREY)
    return render(fig)


def cuda_grid() -> Rendered:
    """03: a 2D grid of blocks over a matrix; one block's threads, and the index each thread computes."""
    fig, ax, W, H = canvas()
    n, cell, x0, y0 = 6, 56, 40, 40
    for i in range(n):
        for j in range(n):
            hit = (i, j) == (2, 1)
            box(ax, x0 + j * cell, y0 + (n - 1 - i) * cell, cell, cell, fc=LIGHT["blue"] if hit else "#fff",
                ec=BLUE if hit else "#90a4ae", lw=3 if hit else 1.2)
    label(ax, x0, y0 + n * cell + 24, "the matrix: a grid of blocks", weight="bold")
    bx, by = x0 + cell, y0 + (n - 3) * cell
    zx, zy, zc = 440, 60, 62
    for i in range(4):
        for j in range(4):
            hit = (i, j) == (1, 2)
            box(ax, zx + j * zc, zy + (3 - i) * zc, zc, zc, fc=LIGHT["green"] if hit else LIGHT["blue"],
                ec=GREEN if hit else BLUE, lw=3 if hit else 1.2)
    arrow(ax, bx + cell, by + cell / 2, zx - 12, zy + 2 * zc, color=BLUE)
    label(ax, zx, zy + 4 * zc + 24, "block (1, 2): its threads", weight="bold")
    tx = zx + 4 * zc + 30
    label(ax, tx, 270, "row = blockIdx.y · blockDim.y + threadIdx.y")
    label(ax, tx, 230, "col = blockIdx.x · blockDim.x + threadIdx.x")
    label(ax, tx, 170, "if (row < n && col < n): one element", color=GREEN)
    label(ax, tx, 130, "a warp: 32 threads of neighbouring col", color=GREY)
    return render(fig)


def matmul_tiles() -> Rendered:
    """04: a block owns a tile of C and walks K, loading a slab of A and of B into shared memory."""
    fig, ax, W, H = canvas()
    s = 170
    ax0, cy = 80, 40
    cx, by = ax0 + s + 60, cy + s + 40
    box(ax, ax0, cy, s, s)                                                   # A, left of C
    box(ax, ax0, cy + s * 0.55, s, s * 0.2, fc=LIGHT["blue"], ec=BLUE)
    box(ax, ax0 + s * 0.3, cy + s * 0.55, s * 0.15, s * 0.2, fc=BLUE, ec=BLUE)
    label(ax, ax0 + s / 2, cy - 18, "A  (M x K)", ha="center", weight="bold")
    box(ax, cx, cy, s, s)                                                    # C
    box(ax, cx + s * 0.6, cy + s * 0.55, s * 0.2, s * 0.2, fc=GREEN, ec=GREEN)
    label(ax, cx + s / 2, cy - 18, "C  (M x N)", ha="center", weight="bold")
    box(ax, cx, by, s, s)                                                    # B, above C
    box(ax, cx + s * 0.6, by, s * 0.2, s, fc=LIGHT["orange"], ec=ORANGE)
    box(ax, cx + s * 0.6, by + s * 0.55, s * 0.2, s * 0.15, fc=ORANGE, ec=ORANGE)
    label(ax, cx - 14, by + s / 2, "B  (K x N)", ha="right", weight="bold")
    tx = cx + s + 70
    label(ax, tx, 390, "a tile of C: one block of threads", color=GREEN, weight="bold")
    label(ax, tx, 350, "it needs a row panel of A and a column panel of B")
    label(ax, tx, 290, "each step of the K loop:", weight="bold")
    label(ax, tx, 255, "one slab of A and one of B into shared memory,", color=INK)
    label(ax, tx, 220, "each value reused by a whole row or column of the tile")
    label(ax, tx, 150, "a thread's own sub-tile: reuse again, in registers", color=GREY)
    return render(fig)


def programs_and_mask(n_elements: int = 27, block: int = 8) -> Rendered:
    """05: programs of BLOCK elements cover n; the last one masks the lanes past the end."""
    fig, ax, W, H = canvas("short")
    cell = (W - 80) / (4 * block)
    y = 130
    for pid in range(4):
        for k in range(block):
            index = pid * block + k
            inside = index < n_elements
            box(ax, 40 + index * cell, y, cell, 60, fc=LIGHT["blue"] if inside else "#fff",
                ec=BLUE if inside else RED, ls="-" if inside else "--", hatch=None if inside else "//")
        label(ax, 40 + (pid * block + block / 2) * cell, y + 90, f"pid {pid}", ha="center", weight="bold")
        ax.plot([40 + pid * block * cell] * 2, [y - 10, y + 70], color=INK, lw=3)
    ax.plot([40 + n_elements * cell] * 2, [y - 40, y + 70], color=RED, lw=2.5, ls="--")
    label(ax, 40 + n_elements * cell - 8, y - 30, "n: the end of the tensor", ha="right", color=RED)
    label(ax, 40, 40, "offs = pid · BLOCK + tl.arange(0, BLOCK);   mask = offs < n  (masked lanes neither load nor store)")
    return render(fig)


def row_on_chip() -> Rendered:
    """06: the fused softmax reads a row once into registers and writes it once."""
    fig, ax, W, H = canvas()
    rows, rh = 6, 34
    for i in range(rows):
        box(ax, 40, 80 + i * rh, 300, rh, fc=LIGHT["blue"] if i == 3 else "#fff", ec=BLUE if i == 3 else "#90a4ae")
    label(ax, 190, 80 + rows * rh + 26, "x in DRAM (HBM)", ha="center", weight="bold")
    box(ax, 450, 150, 300, 150, "", fc=LIGHT["green"], ec=GREEN)
    label(ax, 600, 270, "one program, one row", ha="center", weight="bold")
    label(ax, 600, 235, "m = max(row)", ha="center")
    label(ax, 600, 205, "e = exp(row − m)", ha="center")
    label(ax, 600, 175, "y = e / sum(e)", ha="center")
    label(ax, 600, 120, "registers: on chip", ha="center", color=GREEN)
    for i in range(rows):
        box(ax, 840, 80 + i * rh, 300, rh, fc=LIGHT["orange"] if i == 3 else "#fff", ec=ORANGE if i == 3 else "#90a4ae")
    label(ax, 990, 80 + rows * rh + 26, "y in DRAM", ha="center", weight="bold")
    arrow(ax, 340, 80 + 3.5 * rh, 450, 225, color=BLUE)
    label(ax, 395, 40, "read once", ha="center", color=BLUE)
    arrow(ax, 750, 225, 840, 80 + 3.5 * rh, color=ORANGE)
    label(ax, 795, 40, "write once", ha="center", color=ORANGE)
    return render(fig)


def _grouped(tiles_m: int, tiles_n: int, group_m: int) -> list[list[int]]:
    order = [[0] * tiles_n for _ in range(tiles_m)]
    per_group = group_m * tiles_n
    for pid in range(tiles_m * tiles_n):
        group = pid // per_group
        first = group * group_m
        size = min(tiles_m - first, group_m)
        order[first + (pid % per_group) % size][(pid % per_group) // size] = pid
    return order


def program_order(tiles: int = 8, group_m: int = 4, wave: int = 16) -> Rendered:
    """07: which program computes which tile of C: row-major, then grouped; the first wave shaded."""
    fig, ax, W, H = canvas("tall")
    cell = 50
    for k, (title, order) in enumerate((("row-major", [[r * tiles + c for c in range(tiles)] for r in range(tiles)]),
                                        (f"grouped, GROUP_M = {group_m}", _grouped(tiles, tiles, group_m)))):
        x0 = 60 + k * 580
        for r in range(tiles):
            for c in range(tiles):
                pid = order[r][c]
                first = pid < wave
                box(ax, x0 + c * cell, 20 + (tiles - 1 - r) * cell, cell, cell, str(pid),
                    fc=LIGHT["blue"] if first else "#fff", ec=BLUE if first else "#b0bec5", fs=16,
                    weight="bold" if first else "normal")
        label(ax, x0, 20 + tiles * cell + 26, title, weight="bold")
    label(ax, 60 + 8 * cell + 20, 250, f"shaded: the first\n{wave} programs\n(one wave)", color=BLUE, va="center")
    return render(fig)


def out_of_bounds() -> Rendered:
    """08: two programs of BLOCK=4 over n = 6 elements, mask = offsets <= n: lane n gets through."""
    fig, ax, W, H = canvas("short")
    cell = 110
    for index in range(8):
        inside, stray = index < 6, index == 6
        box(ax, 60 + index * cell, 130, cell, 70, f"x[{index}]" if inside else ("x[n]" if stray else "masked"),
            fc=LIGHT["blue"] if inside else (LIGHT["red"] if stray else LIGHT["grey"]),
            ec=BLUE if inside else (RED if stray else GREY), ls="-" if inside else "--")
    for pid in range(2):
        label(ax, 60 + (pid * 4 + 2) * cell, 230, f"program {pid}: offsets {pid * 4}..{pid * 4 + 3}", ha="center",
              weight="bold")
    label(ax, 60 + 6.5 * cell, 95, "offsets <= n lets lane n through", ha="center", color=RED)
    label(ax, 60, 40, "one element past the end: read from x and y, written to out (someone else's memory)")
    return render(fig)


def compile_chain() -> Rendered:
    """09: the stages from a Triton kernel to what the GPU runs, and where each is read."""
    fig, ax, W, H = canvas("short")
    stages = [("@triton.jit", "Python"), ("TTIR", "Triton IR"), ("TTGIR", "+ layouts"), ("LLVM IR", ""),
              ("PTX", "virtual ISA"), ("SASS", "what runs")]
    w, gap = 150, 42
    for i, (name, sub) in enumerate(stages):
        x = 30 + i * (w + gap)
        colour = "green" if name == "SASS" else ("blue" if name == "PTX" else "grey")
        box(ax, x, 170, w, 80, name, fc=LIGHT[colour], ec={"green": GREEN, "blue": BLUE, "grey": GREY}[colour],
            weight="bold")
        if sub:
            label(ax, x + w / 2, 140, sub, ha="center", color=GREY)
        if i:
            arrow(ax, x - gap, 210, x, 210)
    label(ax, 30 + 4 * (w + gap) + w + 21, 290, "ptxas", ha="center", color=BLUE)
    label(ax, 30, 60, "PTX: what the compiler asked for (portable);  SASS: the machine code of one GPU (sm_90)")
    return render(fig)


def input_pipeline() -> Rendered:
    """10: workers decode the next batches while the GPU trains on this one; the copy overlaps too."""
    fig, ax, W, H = canvas()
    rows = [("workers: decode", [(0, 3, "batch 1", "orange"), (3, 6, "batch 2", "orange"), (6, 9, "batch 3", "orange")]),
            ("copy (pinned)", [(3, 3.8, "1", "purple"), (6, 6.8, "2", "purple"), (9, 9.8, "3", "purple")]),
            ("GPU: train step", [(3.8, 6.4, "step 1", "green"), (6.8, 9.4, "step 2", "green"),
                                 (9.8, 12.4, "step 3", "green")])]
    lanes(ax, rows, x0=20, width=W - 40, top=H - 60, lane_h=60, gap=36, name_w=230, t_max=12.6)
    label(ax, 20, 40, "the GPU stays busy only if the workers produce a batch at least as fast as a step takes",
          color=GREY)
    return render(fig)


def dlrm_model() -> Rendered:
    """11: DLRM: dense features through a bottom MLP, sparse ids through embedding tables, then the
    interaction and a top MLP."""
    fig, ax, W, H = canvas()
    box(ax, 30, 300, 220, 60, "13 dense features", fc=LIGHT["grey"], ec=GREY)
    box(ax, 30, 120, 220, 60, "26 sparse ids", fc=LIGHT["grey"], ec=GREY)
    box(ax, 330, 300, 200, 60, "bottom MLP", fc=LIGHT["blue"], ec=BLUE)
    box(ax, 330, 100, 200, 100, "embedding\ntables (lookup)", fc=LIGHT["orange"], ec=ORANGE)
    box(ax, 620, 200, 200, 70, "interaction\n(dot products)", fc=LIGHT["purple"], ec=PURPLE)
    box(ax, 900, 200, 130, 70, "top MLP", fc=LIGHT["blue"], ec=BLUE)
    box(ax, 900, 60, 260, 60, "click probability", fc=LIGHT["green"], ec=GREEN)
    arrow(ax, 250, 330, 330, 330)
    arrow(ax, 250, 150, 330, 150)
    arrow(ax, 530, 330, 620, 250)
    arrow(ax, 530, 150, 620, 220)
    arrow(ax, 820, 235, 900, 235)
    arrow(ax, 965, 200, 965, 120)
    label(ax, 30, 40, "the tables hold most parameters and memory traffic; the MLPs are small matmuls", color=GREY)
    return render(fig)


def lora_shapes() -> Rendered:
    """12: a LoRA linear: the frozen weight's matmul plus a rank-r detour, added in one epilogue."""
    fig, ax, W, H = canvas()
    box(ax, 40, 120, 140, 200, "x\nT x d", fc=LIGHT["grey"], ec=GREY)
    label(ax, 210, 220, "@", ha="center", fs=22)
    box(ax, 240, 120, 200, 200, "Wᵀ\nd x d\n(frozen)", fc=LIGHT["blue"], ec=BLUE)
    label(ax, 470, 220, "+", ha="center", fs=26)
    box(ax, 500, 120, 140, 200, "x", fc=LIGHT["grey"], ec=GREY)
    box(ax, 660, 120, 26, 200, "", fc=LIGHT["orange"], ec=ORANGE)
    label(ax, 673, 95, "Aᵀ: d x r", ha="center", color=ORANGE)
    box(ax, 706, 294, 200, 26, "", fc=LIGHT["orange"], ec=ORANGE)
    label(ax, 806, 345, "Bᵀ: r x d", ha="center", color=ORANGE)
    label(ax, 780, 230, "· scale", ha="center")
    label(ax, 960, 260, "r ≪ d:", weight="bold")
    label(ax, 960, 225, "the detour is a", color=INK)
    label(ax, 960, 195, "few % of the FLOPs", color=INK)
    label(ax, 40, 40, "fused: one matmul kernel, x Aᵀ and the rank-r update added in its epilogue, y written once",
          color=GREEN)
    return render(fig)


def giou_boxes() -> Rendered:
    """13: GIoU: the IoU of two boxes, minus the share of the enclosing box that neither covers."""
    fig, ax, W, H = canvas()
    box(ax, 60, 60, 520, 340, "", fc="#fff", ec=GREY, ls="--", lw=2)
    box(ax, 90, 150, 260, 200, "", fc=LIGHT["blue"], ec=BLUE, lw=2.5)
    box(ax, 270, 80, 280, 190, "", fc=LIGHT["orange"], ec=ORANGE, lw=2.5)
    box(ax, 270, 150, 80, 120, "", fc=LIGHT["purple"], ec=PURPLE, lw=2.5)
    label(ax, 100, 325, "prediction A", color=BLUE, weight="bold")
    label(ax, 540, 100, "target B", color=ORANGE, weight="bold", ha="right")
    label(ax, 570, 380, "enclosing box C", color=GREY, ha="right")
    label(ax, 640, 330, "IoU = |A ∩ B| / |A ∪ B|", color=PURPLE)
    label(ax, 640, 270, "GIoU = IoU − |C \\ (A ∪ B)| / |C|")
    label(ax, 640, 210, "loss = 1 − GIoU: a gradient even when")
    label(ax, 640, 180, "the boxes do not overlap")
    label(ax, 640, 110, "per box: a few dozen FLOPs on 8 numbers,", color=GREY)
    label(ax, 640, 80, "so the loss is memory- and launch-bound", color=GREY)
    return render(fig)


def tma_pipeline() -> Rendered:
    """14: warp specialization: a producer warp issues TMA copies into a ring of stages while consumer
    warps run wgmma on the stages already full."""
    fig, ax, W, H = canvas()
    rows = [("producer: TMA", [(0, 1, "load 0", "orange"), (1, 2, "load 1", "orange"), (2, 3, "load 2", "orange"),
                               (3.2, 4.2, "load 3", "orange"), (4.4, 5.4, "load 4", "orange")]),
            ("consumers: wgmma", [(1, 2.2, "k 0", "blue"), (2.2, 3.4, "k 1", "blue"), (3.4, 4.6, "k 2", "blue"),
                                  (4.6, 5.8, "k 3", "blue"), (5.8, 7, "k 4", "blue")])]
    ys, at = lanes(ax, rows, x0=20, width=W - 40, top=H - 40, lane_h=56, gap=40, name_w=220, t_max=7.2)
    for s in range(3):
        box(ax, 260 + s * 150, 50, 130, 60, f"stage {s}", fc=LIGHT["green"], ec=GREEN)
    label(ax, 260, 140, "shared memory: a ring of stages (load k goes to stage k mod 3)", weight="bold")
    label(ax, 740, 80, "a stage is refilled only when\nthe consumers release it", color=GREY)
    return render(fig)


def online_softmax() -> Rendered:
    """15: the online softmax over key tiles: the running max only grows; each time it does, the sums
    and the accumulator so far are rescaled by exp(m_old − m_new)."""
    fig, ax, W, H = canvas()
    tiles = [[1.0, 2.5, 0.5, 1.5], [3.5, 1.0, 2.0, 0.0], [2.0, 1.5, 3.0, 1.0], [5.0, 2.0, 4.5, 1.0]]
    cell, x0, y0 = 60, 60, 250
    running = float("-inf")
    for t, tile in enumerate(tiles):
        xt = x0 + t * (4 * cell + 30)
        for k, value in enumerate(tile):
            box(ax, xt + k * cell, y0, cell, 50, f"{value:g}", fc=LIGHT["blue"], ec=BLUE)
        label(ax, xt + 2 * cell, y0 + 80, f"key tile {t + 1}", ha="center", weight="bold")
        new = max(running, max(tile))
        grew = new > running and t > 0
        running = new
        box(ax, xt + cell, y0 - 110, 2 * cell, 50, f"m = {running:g}", fc=LIGHT["orange"] if grew else "#fff",
            ec=ORANGE)
        arrow(ax, xt + 2 * cell, y0, xt + 2 * cell, y0 - 60, color=GREY)
        if grew:
            label(ax, xt + 2 * cell, y0 - 135, "grew: rescale", ha="center", color=ORANGE)
    label(ax, 60, 40, "acc ← acc · exp(m_old − m_new) + exp(S − m_new) @ V;  ℓ likewise;  divide by ℓ once at the end")
    return render(fig)


def memory_categories() -> Rendered:
    """16: what is live through a training step, by category (schematic, not measured)."""
    import numpy as np

    fig = new_figure()
    ax = fig.add_subplot()
    t = np.linspace(0, 3, 301)
    params = np.full_like(t, 1.0)
    optim = np.full_like(t, 2.0)
    grads = np.clip(t - 1, 0, 1) * 1.0
    grads[t > 2.4] = 1.0
    acts = np.where(t < 1, t * 3.0, np.where(t < 2, (2 - t) * 3.0, 0))
    layers = [("parameters", params, "#0b5fb0"), ("optimizer state", optim, "#8e44ad"),
              ("gradients", grads, "#2e8b57"), ("activations", acts, "#e67e22")]
    ax.stackplot(t, *[l[1] for l in layers], colors=[l[2] for l in layers], labels=[l[0] for l in layers], alpha=0.85)
    for x, text in ((0.5, "forward"), (1.7, "backward"), (2.7, "optimizer step")):
        ax.text(x, 7.6, text, ha="center", fontsize=FONT["label"], fontweight="bold")
    ax.axvline(1, color=INK, lw=1.5, ls=":")
    ax.axvline(2.4, color=INK, lw=1.5, ls=":")
    ax.set_xlim(0, 3)
    ax.set_ylim(0, 8.4)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_ylabel("live memory (schematic)", fontsize=FONT["label"])
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, fontsize=FONT["legend"],
              reverse=True)  # beside the areas, top to bottom as they are stacked
    fig.tight_layout(pad=0.4)
    return render(fig)


def ddp_bucket_overlap() -> Rendered:
    """17: DDP: gradients are all-reduced in buckets as soon as a bucket is full, overlapping the rest
    of the backward pass; only the last bucket waits after it."""
    fig, ax, W, H = canvas()
    rows = [("backward", [(0, 2, "layers 4-3", "blue"), (2, 4, "layers 2-1", "blue"), (4, 5.2, "layer 0", "blue")]),
            ("all-reduce", [(2, 3.6, "bucket 1", "green"), (4, 5.6, "bucket 2", "green"),
                            (5.6, 6.6, "bucket 3", "green")]),
            ("optimizer", [(6.6, 7.6, "step", "orange")])]
    ys, at = lanes(ax, rows, x0=20, width=W - 40, top=H - 50, lane_h=56, gap=36, name_w=170, t_max=7.8)
    label(ax, 20, 40, "a bucket's hooks fire when its last gradient is written; NCCL runs on its own stream",
          color=GREY)
    return render(fig)


DIAGRAMS = {f.__name__: f for f in (host_device_timeline, gpu_idle_gaps, cuda_grid, matmul_tiles,
                                     programs_and_mask, row_on_chip, program_order, out_of_bounds, compile_chain,
                                     input_pipeline, dlrm_model, lora_shapes, giou_boxes, tma_pipeline,
                                     online_softmax, memory_categories, ddp_bucket_overlap)}
