"""The exercises' specs: one module per exercise, ``ex_5_1.py`` for Exercise 5.1 (see ../spec.py).

Nothing lists them: the registry finds every ``ex_*`` module here (registry.load_specs) and joins it
with the markers of the package; tests/exercises/test_exercises.py collects their public tests.
"""
