"""The one registry of head classes: the name a saved head.json stores -> its class."""

from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.heads.multiple_choice import XLNetMultipleChoice
from xlnet_tf.heads.pretrainer import XLNetPretrainer
from xlnet_tf.heads.question_answering import XLNetQuestionAnswering
from xlnet_tf.heads.token_classifier import XLNetTokenClassifier
from xlnet_tf.utils.errors import require

HEAD_CLASSES = {head.__name__: head for head in (XLNetPretrainer, XLNetClassifier,
                                                  XLNetMultipleChoice, XLNetQuestionAnswering,
                                                  XLNetTokenClassifier)}


def head_class(name, source: str):
  """The head class stored as `name`; one error naming `source` (e.g. head.json's path) for
  any other value."""
  require(name in HEAD_CLASSES, f"{source}: class", f"one of {list(HEAD_CLASSES)}", repr(name))
  return HEAD_CLASSES[name]
