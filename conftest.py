"""The whole test run (tests/ and notebooks/): the longest files start first.

CI runs `pytest -n 2 --dist loadfile`: each file goes whole to one of two workers, in collection order, as they
free up. Started last, one long file keeps one core busy while the other has nothing left to do; started first,
the short files fill in around it. Files not listed keep their order, after these.

Caveat: pytest-xdist 3.x hands out the files by their number of tests, most first, unless run with
`--no-loadscope-reorder` (CI's command does not pass it): there this order only breaks ties, and the compile test
(4 tests) and test_new_chapter.py (2) start last. Honouring this order (`config.option.loadscopereorder = False`
in a `pytest_configure` here) balanced the two workers in a CI-like run, but it also ran test_slides (Chromium) and
test_new_chapter (gradings of its own) next to test_exercises.py, and two gradings went over their 20 s bound.
"""

LONGEST_FIRST = (
    "tests/test_exercises.py",            # every exercise graded, with its wrong answers
    "tests/test_cuda_build.py",           # C++ builds: notebook 03's twin (shared with its test and notebooks), two more
    "tests/test_compile_targets.py",      # every lesson kernel compiled for three GPUs
    "notebooks/04_cuda_gemm_ladder.ipynb",
    "tests/test_slides.py",
    "tests/test_grading.py",
    "tests/test_new_chapter.py",
    "notebooks/deep_dives/11c_compiled_kernels_by_hand.ipynb",
    "notebooks/deep_dives/13b_giou_cuda_compile_and_step.ipynb",
    "notebooks/deep_dives/12b_lora_elementwise_tail.ipynb",
    "notebooks/deep_dives/07b_tma_and_limits.ipynb",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    root = config.rootpath

    def place(item):
        path = item.path
        return rank.get(path.relative_to(root).as_posix(), len(rank)) if path.is_relative_to(root) else len(rank)

    items.sort(key=place)  # stable: cells keep their order
