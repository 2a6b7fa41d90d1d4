"""The speed work, one module per plain form, each proven equal to its plain form by tests/fast/."""
