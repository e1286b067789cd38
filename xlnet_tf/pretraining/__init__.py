"""Pretraining: the data stage (`data/`), the distributed loop with its checkpoints, logs and
summaries, the recipes runs start from, and the language-model evaluations."""

from xlnet_tf.pretraining.data import (PretrainingDataConfig, create_pretraining_data,
                                       load_record_info, pretraining_dataset)
from xlnet_tf.pretraining.loop import PretrainingOptions, PretrainingRun
from xlnet_tf.pretraining.recipes import PretrainingRecipeOptions

__all__ = ["PretrainingDataConfig", "PretrainingOptions", "PretrainingRecipeOptions",
           "PretrainingRun", "create_pretraining_data", "load_record_info",
           "pretraining_dataset"]
