"""Pretraining: the objectives, corpus, word spans, factorization orders, examples, TFRecords
and their reader, the data stage, the embedded default data, the distributed loop and its
summaries.

Names are imported on first use (PEP 562): the heads import `pretraining.objectives`, which
must not load the loop (it imports the heads).
"""

import importlib

_EXPORTS = {  # public name -> the module defining it
    "PretrainingOptions": "xlnet_tf.pretraining.loop",
    "PretrainingRun": "xlnet_tf.pretraining.loop",
    "PretrainingSettings": "xlnet_tf.pretraining.settings",
    "create_pretraining_data": "xlnet_tf.pretraining.stage",
    "load_record_info": "xlnet_tf.pretraining.records",
    "pretraining_dataset": "xlnet_tf.pretraining.records",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
  if name in _EXPORTS:
    return getattr(importlib.import_module(_EXPORTS[name]), name)
  raise AttributeError(f"module 'xlnet_tf.pretraining' has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(_EXPORTS))
