"""Reference solutions of the exercises at the end of notebooks 03-14 (``solutions.nb05`` ...).

Try each exercise in its notebook first; `course_utils.grading.grade` tells you whether your answer is
right, and on which input it is not. tests/test_exercises.py checks that every solution here passes.
"""
