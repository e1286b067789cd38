"""Pretraining: the data stage (`data/`), the distributed loop with its checkpoints, logs and
summaries, the recipes runs start from, and the language-model evaluations."""

from xlnet_tf.pretraining.data import (PretrainingSettings, create_pretraining_data,
                                       load_record_info, pretraining_dataset)
from xlnet_tf.pretraining.loop import PretrainingOptions, PretrainingRun

__all__ = ["PretrainingOptions", "PretrainingRun", "PretrainingSettings",
           "create_pretraining_data", "load_record_info", "pretraining_dataset"]
