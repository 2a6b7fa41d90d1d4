"""Training a translator: the loop (trainer.py), its options, its run folder, its status line, and data
parallelism over MPI (distributed.py, chapter 14)."""
