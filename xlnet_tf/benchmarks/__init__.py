"""What run/benchmark.py measures (rows: one module per kind of row, each row run in a process
of its own by processes, the grid of a run in runs, its tables in report, the fine-tuning
memory table in finetuning_memory), the step run/profile_step.py profiles (steps), and the
int8 measurements of run/quantized_speed.py, run/quantized_accuracy.py and
run/quantized_generation.py. Imported by those commands and the tests only.
"""

__all__ = []
