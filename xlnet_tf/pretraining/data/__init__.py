"""The pretraining data stage: text files -> tokens -> rows -> A/B examples with word spans
and factorization orders -> TFRecords of the objective's schema, and their reader."""

from xlnet_tf.pretraining.data.records import load_record_info, pretraining_dataset
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.pretraining.data.stage import create_pretraining_data

__all__ = ["PretrainingDataConfig", "create_pretraining_data", "load_record_info",
           "pretraining_dataset"]
