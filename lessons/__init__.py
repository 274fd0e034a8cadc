"""Kernels and classes that one notebook teaches and a later one reuses.

Every module here is written by `python -m course_utils.export` from the notebook cells marked
``# export: lessons/<module>.py``; read them in their notebook, where they are explained.
"""
