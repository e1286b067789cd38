"""Pretraining: corpus, word spans, factorization orders, examples, TFRecords and their reader,
the data stage, the embedded default data, the distributed loop and its summaries."""

from xlnet_tf.pretraining.examples import PretrainingSettings
from xlnet_tf.pretraining.loop import PretrainingOptions, PretrainingRun
from xlnet_tf.pretraining.records import load_record_info, pretraining_dataset
from xlnet_tf.pretraining.stage import create_pretraining_data

__all__ = ["PretrainingOptions", "PretrainingRun", "PretrainingSettings",
           "create_pretraining_data", "load_record_info", "pretraining_dataset"]
