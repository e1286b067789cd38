"""Fine-tuning tasks: one driver (finetuning.finetune) and per task its reader, features,
metrics and decoding: classification (GLUE, IMDB, generic files), squad, race, tagging."""

from xlnet_tf.tasks.finetuning import FinetuningOptions, feature_dataset, finetune, predict

__all__ = ["FinetuningOptions", "feature_dataset", "finetune", "predict"]
