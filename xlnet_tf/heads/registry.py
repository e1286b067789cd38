"""The one registry of head classes: the name a saved head.json (or, through its transformers
class, a Hugging Face config.json) stores -> its class; and loading whatever a pretrained
directory holds by it."""

import os
from typing import Optional, Tuple

from xlnet_tf.checkpoints import own, pretrained
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.heads.multiple_choice import XLNetMultipleChoice
from xlnet_tf.heads.pretrainer import XLNetPretrainer
from xlnet_tf.heads.question_answering import XLNetQuestionAnswering
from xlnet_tf.heads.token_classifier import XLNetTokenClassifier
from xlnet_tf.modeling.backbone import XLNetModel
from xlnet_tf.utils.errors import require

HEAD_CLASSES = {head.__name__: head for head in (XLNetPretrainer, XLNetClassifier,
                                                  XLNetMultipleChoice, XLNetQuestionAnswering,
                                                  XLNetTokenClassifier)}


def head_class(name, source: str):
  """The head class stored as `name`; one error naming `source` (e.g. head.json's path) for
  any other value."""
  require(name in HEAD_CLASSES, f"{source}: class", f"one of {list(HEAD_CLASSES)}", repr(name))
  return HEAD_CLASSES[name]


def saved_head(directory: str) -> Optional[Tuple[type, dict]]:
  """(head class, constructor arguments) from an own-format directory's head.json; None
  without the file (a backbone). Errors name the file."""
  head_file = own.read_head_file(directory)
  if head_file is None:
    return None
  name, arguments = head_file
  return head_class(name, os.path.join(directory, own.HEAD_FILE)), arguments


def load_saved(path: str, **config_overrides):
  """The model a pretrained directory (or hub id) holds: the head its head.json or
  config.json names, else its XLNetModel (also for a transformers head xlnet_tf has no class
  for), by that class's from_pretrained (with .labels, .thresholds and .tokenizer)."""
  stored = pretrained.stored_head(pretrained.locate(path))
  if stored is None or stored.class_name is None:
    return XLNetModel.from_pretrained(path, **config_overrides)
  return head_class(stored.class_name, stored.source).from_pretrained(
      path, **config_overrides)
