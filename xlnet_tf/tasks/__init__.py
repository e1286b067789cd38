"""Fine-tuning tasks: one loop (finetuning.finetune), one run of any task from start to end
(finetuning_run.run_finetuning) and per family its task (task.FinetuningTask: options, data,
head, loss, evaluation, outputs) with its reader, features, metrics and decoding:
classification (GLUE, IMDB, generic files), squad, race, tagging."""

from xlnet_tf.tasks.finetuning import (FinetuningOptions, feature_dataset, finetune, predict,
                                       training_length)
from xlnet_tf.tasks.finetuning_run import run_finetuning
from xlnet_tf.tasks.pretrained_model import ModelSource, PretrainedModel
from xlnet_tf.tasks.task import FinetuningTask, TaskOptions

__all__ = ["FinetuningOptions", "FinetuningTask", "ModelSource", "PretrainedModel",
           "TaskOptions", "feature_dataset", "finetune", "predict", "run_finetuning",
           "training_length"]
