"""xlnet_tf: XLNet for TensorFlow 2 / Keras 3.

  from xlnet_tf import (XLNetConfig, XLNetModel, XLNetPretrainer, XLNetClassifier,
                        XLNetMultipleChoice, XLNetQuestionAnswering, XLNetTokenClassifier,
                        XLNetTokenizer, XLNetPreprocessor, checkpoints)

Names are imported on first use (PEP 562), so `import xlnet_tf` and `xlnet_tf.config` do not
load TensorFlow until a model, tokenizer or checkpoint function is asked for.
"""

import importlib

from xlnet_tf.utils import cpu_features as _cpu_features

# oneDNN on where TensorFlow would leave it off (AVX2 CPUs): its int8 product. TensorFlow reads
# the switch once, when it loads, so before any module of the package imports TensorFlow.
_cpu_features.default_onednn_on()

__version__ = "0.1.0"

_EXPORTS = {  # public name -> the module defining it
    "XLNetConfig": "xlnet_tf.config",
    "XLNetModel": "xlnet_tf.modeling.backbone",
    "XLNetPretrainer": "xlnet_tf.heads.pretrainer",
    "XLNetClassifier": "xlnet_tf.heads.classifier",
    "XLNetMultipleChoice": "xlnet_tf.heads.multiple_choice",
    "XLNetQuestionAnswering": "xlnet_tf.heads.question_answering",
    "XLNetTokenClassifier": "xlnet_tf.heads.token_classifier",
    "XLNetTokenizer": "xlnet_tf.text.tokenizer",
    "XLNetPreprocessor": "xlnet_tf.text.preprocessor",
}
_SUBPACKAGES = ("benchmarks", "checkpoints", "heads", "inference", "modeling", "objectives",
                "pretraining", "serving", "studies", "tasks", "text", "training", "utils")

__all__ = sorted(_EXPORTS) + ["checkpoints"]


def __getattr__(name):
  if name in _EXPORTS:
    return getattr(importlib.import_module(_EXPORTS[name]), name)
  if name in _SUBPACKAGES:
    return importlib.import_module(f"xlnet_tf.{name}")
  raise AttributeError(f"module 'xlnet_tf' has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(_EXPORTS) | {"checkpoints"})
