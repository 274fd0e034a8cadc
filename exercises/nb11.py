"""Notebook 11 (DLRM): count a range's host syncs in a profile (on event trees hypothesis draws), and the
ReLU's backward pass as a Triton kernel."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from course_utils.device import pick_size
from course_utils.grading import Exercise, Inputs
from exercises import case, described, kinks, randn, sizes, tensor_arg, values

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_NAMES = ("tokenize", "validate", "aten::item", "aten::_local_scalar_dense", "aten::min", "Optimizer.step")


@dataclass(eq=False)
class ProfilerEvent:
    """The two fields of a `torch.profiler` event (`prof.events()`) that exercise 1 reads."""
    name: str
    cpu_parent: "ProfilerEvent | None" = None


def _path(event: ProfilerEvent) -> str:
    names = []
    while event is not None:
        names.append(event.name)
        event = event.cpu_parent
    return " > ".join(reversed(names))


@st.composite
def _event_trees(draw) -> Inputs:
    back = draw(st.lists(st.integers(-1, 3), min_size=0, max_size=pick_size(40, 14)))  # parent: 1-4 events back
    names = draw(st.lists(st.sampled_from(_NAMES), min_size=len(back), max_size=len(back)))
    if draw(st.booleans()):  # the notebook's shape: a check range inside tokenize, an .item() inside that
        back, names = [-1, 0, 0, 0, -1, 0] + back, ["tokenize", "validate", "aten::item", "aten::_local_scalar_dense",
                                                    "Optimizer.step", "aten::item"] + names

    def make() -> tuple:
        events: list[ProfilerEvent] = []
        for i, (k, name) in enumerate(zip(back, names)):
            events.append(ProfilerEvent(name, events[i - 1 - k] if 0 <= k < i else None))
        return events, "tokenize"

    listing = "; ".join(_path(e) for e in make()[0])
    return Inputs(make, f"{len(back)} events, range 'tokenize': [{listing}]")


def _item_calls_in_range(events: list, range_name: str) -> int:
    def inside(event) -> bool:
        parent = event.cpu_parent
        while parent is not None and parent.name != range_name:
            parent = parent.cpu_parent
        return parent is not None

    return sum(1 for e in events if e.name == "aten::item" and inside(e))


def _chain() -> tuple:
    """An .item() four levels below the range, an .item() inside it, and one outside any range."""
    events = [ProfilerEvent("tokenize")]
    for name in ("validate", "validate", "validate", "aten::item", "aten::item"):
        events.append(ProfilerEvent(name, events[-1]))
    return events + [ProfilerEvent("aten::item")], "tokenize"


ITEM_CALLS = Exercise(
    "11.1 item_calls_in_range", "item_calls_in_range(events, range_name): how many 'aten::item' events have a "
    "range of that name among their ancestors (cpu_parent, its cpu_parent, ...)",
    _item_calls_in_range, _event_trees(), examples=(150, 300),
    families={"empty": lambda: [case("0 events, range 'tokenize': []", [], "tokenize")],
              "edges": lambda: [Inputs(_chain, "7 events, range 'tokenize': [tokenize > validate > validate > "
                                               "validate > aten::item > aten::item; aten::item]")]})


@st.composite
def _relu_backward_inputs(draw) -> Inputs:
    n, dtype = draw(sizes(pick_size(1 << 20, 5000))), draw(st.sampled_from(DTYPES))
    grad, about_grad = tensor_arg(draw, "grad", (n,), dtype, ("contiguous", "strided"))
    y, about_y = tensor_arg(draw, "y", (n,), dtype, ("contiguous", "strided"), seed=1)
    return Inputs(lambda: (grad(), y()), f"{about_grad}, {about_y}")


def _relu_backward(grad: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.threshold_backward(grad, y, 0)


RELU_BACKWARD = Exercise(
    "11.2 relu_backward", "relu_backward(grad, y) = grad where y > 0, else 0 (ReLU's gradient from its output y), "
    "as a Triton kernel, for 1-D tensors of one dtype (fp32/fp16/bf16)",
    _relu_backward, _relu_backward_inputs(), DTYPES, block={"block": 16},
    families={"kinks": lambda: [case(f"{described('grad', g)}, {described('y', y)}: half of y exactly 0 (as a "
                                     "ReLU's output)", values(g), values(y))
                                for g, y in [(randn(37, dtype=d, seed=1), kinks(randn(37, dtype=d).relu()))
                                             for d in (torch.float32, torch.bfloat16)]],
              "programs": lambda: [case("grad: float32 (50,), y: float32 (50,) (block=16)", values(randn(50, seed=1)),
                                        values(randn(50)))],
              "empty": lambda: [case("grad: float32 (0,), y: float32 (0,)", values(randn(0)), values(randn(0)))]})
