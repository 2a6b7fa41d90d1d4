"""What the training loop (train.py) stands on: its options, its run folder, its status line."""
