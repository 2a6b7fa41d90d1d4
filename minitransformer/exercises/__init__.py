"""The classroom edition: exercises marked in the source, a student-edition generator, an autograder.

    python -m minitransformer.exercises list              # the exercises, their chapters, markers, prerequisites
    python -m minitransformer.exercises student OUT_DIR   # the repository with the solutions taken out
    python -m minitransformer.exercises check 5.1         # a student's verdict on one exercise (pytest -m ex_5_1)
    python -m minitransformer.exercises grade 5.1 --submission DIR [--junitxml F] [--gradescope F]
                                                          # a teacher's score (pytest -m grades_5_1)
    python -m minitransformer.exercises nbgrader COURSE_DIR [--only IDS]   # an nbgrader course

The solutions sit in the package between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` comment lines, under a header comment naming the
exercise (see registry.py); listings in the chapters that answer one sit
between ``<!-- BEGIN SOLUTION 5.1 -->`` and ``<!-- END SOLUTION -->`` (see
edition.py). Everything else about an exercise (its public tests, its cases,
its prerequisites, its catalogued mistakes) is one object, its spec:
``specs/ex_5_1.py`` (see spec.py). TEACHING.md is the instructor's guide. Nothing
here is imported by ``import minitransformer``.
"""
from .registry import Exercise, ExerciseError, get_exercise, load_exercises

__all__ = ["Exercise", "ExerciseError", "get_exercise", "load_exercises"]
