"""Studies: experiments over the library that reproduce a table of a paper.

A study pretrains, fine-tunes or times models to answer one question (the Model Garden keeps
such research in `projects/`): transfer.py (XLNet's Table 6: pretraining variants, fine-tuned
against a random-init row), manual_pages.py (its corpus and tasks from /usr/share/man),
evaluation_speed.py (Transformer-XL's Table 7: per-token evaluation time with memory against
a vanilla window). Studies sit above `tasks/` and `pretraining/` and may import anything below
them; nothing in the library imports a study (only run/ CLIs and tests do).
"""

from xlnet_tf.studies.evaluation_speed import SpeedRow, evaluation_speed
from xlnet_tf.studies.transfer import Task, TransferStudyOptions, run_study

__all__ = ["SpeedRow", "Task", "TransferStudyOptions", "evaluation_speed", "run_study"]
