"""The classroom edition: exercises marked in the source, a student-edition generator, an autograder.

    python -m minitransformer.exercises list              # the exercises, their chapters and markers
    python -m minitransformer.exercises student OUT_DIR   # the repository with the solutions taken out
    python -m minitransformer.exercises check 5.1         # grade one exercise (pytest -m ex_5_1)

The solutions sit in the package between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` comment lines, under a header comment naming the
exercise (see registry.py); TEACHING.md is the instructor's guide. Nothing
here is imported by ``import minitransformer``.
"""
from .registry import Exercise, ExerciseError, get_exercise, load_exercises

__all__ = ["Exercise", "ExerciseError", "get_exercise", "load_exercises"]
