"""The whole test run (tests/ and notebooks/): the longest files start first.

CI runs `pytest -n 2 --dist loadfile`: each file goes whole to one of two workers, in collection order, as they
free up. Started last, one long file keeps one core busy while the other has nothing left to do; started first,
the short files fill in around it. Files not listed keep their order, after these.

pytest-xdist 3.x would hand the files out by their number of tests, most first (then the compile test, with 4
tests, and test_new_chapter.py, with 2, start last and keep one core busy alone at the end); `pytest_configure`
turns that off, as `--no-loadscope-reorder` does, so this order holds. The browser test of the decks (Chromium)
and the new-chapter test (gradings of its own) go last: started early, they run next to test_exercises.py, whose
gradings have a 20 s bound each on a 2-core CPU.
"""

LONGEST_FIRST = (
    "tests/test_exercises.py",            # every exercise graded, with its wrong answers
    "tests/test_cuda_build.py",           # C++ builds: notebook 03's twin (shared with its test and notebooks), two more
    "tests/test_compile_targets.py",      # every lesson kernel compiled for three GPUs
    "notebooks/04_cuda_gemm_ladder.ipynb",
    "tests/test_grading.py",
    "notebooks/deep_dives/11c_compiled_kernels_by_hand.ipynb",
    "notebooks/deep_dives/13b_giou_cuda_compile_and_step.ipynb",
    "notebooks/deep_dives/12b_lora_elementwise_tail.ipynb",
    "notebooks/deep_dives/07b_tma_and_limits.ipynb",
)


#: Started last (see above).
LAST = (
    "tests/test_new_chapter.py",
    "tests/test_slides.py",
)


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist's --no-loadscope-reorder
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session, config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    rank.update({path: len(LONGEST_FIRST) + 1 + i for i, path in enumerate(LAST)})
    root = config.rootpath

    def place(item):
        path = item.path
        unlisted = len(LONGEST_FIRST)
        return rank.get(path.relative_to(root).as_posix(), unlisted) if path.is_relative_to(root) else unlisted

    items.sort(key=place)  # stable: cells keep their order
