"""The whole test run (tests/ and notebooks/): the longest files start first.

CI runs `pytest -n 2 --dist loadfile`: each file goes whole to one of two workers, in collection order, as they
free up. Started last, one long file keeps one core busy while the other has nothing left to do; started first,
the short files fill in around it. Files not listed keep their order, after these.
"""

LONGEST_FIRST = (
    "tests/test_exercises.py",            # every exercise graded, with its wrong answers
    "tests/test_cuda_build.py",           # C++ extension builds in a fresh cache
    "tests/test_compile_targets.py",      # every lesson kernel compiled for three GPUs
    "tests/test_nb03_square_matrix.py",   # a C++ build
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
    items.sort(key=lambda item: rank.get(item.path.relative_to(root).as_posix(), len(rank)))  # stable: cells keep order
