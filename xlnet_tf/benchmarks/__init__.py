"""What run/benchmark.py and run/profile_step.py time and profile: the measured steps of
every mode, and the peak memory of a fine-tuning step. Imported by those CLIs and tests only.
"""

__all__ = []
