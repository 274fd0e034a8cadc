"""Plausible wrong answers to the exercises of notebooks 03-14, one module per notebook.

Each module has ``WRONG``: a list of ``(exercise, label, fn, words)``: tests/test_exercises.py grades ``fn``
against ``exercise`` and asserts that it fails with a message containing each of ``words``, the part of
the message that tells the learner what is wrong.
"""
