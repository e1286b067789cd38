"""Raw strings in a head's call, fit, evaluate and predict, packed by `head.preprocessor`.

Where strings come in:
  in memory (a list, NumPy array or tensor of strings, or a tuple of them): packed once,
    eagerly, into id tensors that Keras then batches as any ids (batch_size, shuffle,
    validation_split, class_weight act as for ids);
  a tf.data dataset whose features are strings: mapped through the preprocessor in tf.data's
    threads (not in the compiled step), elements `features`, `(features, labels)` or
    `(features, labels, sample_weight)`; an element of strings only is features alone (a pair
    with no labels: labels are never strings).
Anything else goes to Keras untouched: the id path pays one dtype check per call.

Each head's strings, by its text inputs (the SavedModel's text signature, text.packing):
  XLNetClassifier, XLNetTokenClassifier  texts or (texts, texts_b) [B]
  XLNetMultipleChoice                    (texts [B], options [B, C]): each option packed after
                                         its text (a RACE question goes with each option)
  XLNetQuestionAnswering                 (questions, contexts) [B], packed as the SQuAD window
                                         `context <sep> question <sep> <cls>`; predict only
A dict by those names works too. The tagger's labels, for fit and evaluate on strings, are per
position of the packed sequence ([B, T], -1 = not scored); word-level labels need
xlnet_tf.tasks.tagging's alignment.
"""

import tensorflow as tf

from xlnet_tf.text.preprocessor import holds_strings
from xlnet_tf.utils.errors import UserInputError

PAIR_INPUTS = ("text", "text_b")  # the classifier's and tagger's: texts, or pairs
_LAYOUTS_SHOWN = {PAIR_INPUTS: "texts or (texts, texts_b)",
                  ("text", "options"): "(texts [B], options [B, C])",
                  ("question", "context"): "(questions, contexts)"}


def is_text(x) -> bool:
  """Whether a model input is raw strings: strings, or a tuple or dict of them."""
  if isinstance(x, tuple):
    return bool(x) and all(holds_strings(part) for part in x)
  if isinstance(x, dict):
    return bool(x) and all(holds_strings(value) for value in x.values())
  return holds_strings(x)


def text_input_names(head):
  """The names of the head's text inputs (see the module docstring); UserInputError for a
  head that reads no raw strings (the pretrainer)."""
  if not hasattr(head, "serving_outputs"):
    raise UserInputError(f"{type(head).__name__} reads no raw strings: its inputs "
                         "(perm_mask, target_mapping, ...) come from xlnet_tf.pretraining's data")
  return getattr(head, "serving_text_inputs", None) or PAIR_INPUTS


def text_features(head, texts):
  """The head's features of raw strings: the preprocessor's packed ids, plus what the head
  derives from them for serving (question answering's p_mask and cls_index)."""
  preprocessor = _preprocessor_of(head)
  features = preprocessor(_named(head, texts))
  add_features = getattr(head, "serving_features", None)
  if add_features is not None:
    features = add_features(features, preprocessor.tokenizer.special_ids.sep)
  return features


def _preprocessor_of(head):
  """head.preprocessor; one error saying how to get one where it is None."""
  preprocessor = head.preprocessor
  if preprocessor is None:
    name = type(head).__name__
    raise UserInputError(
        f"{name} got raw strings but has no preprocessor to turn them into ids: load it with "
        f"{name}.from_pretrained(<a directory holding spiece.model>), or set "
        "`head.preprocessor = XLNetPreprocessor(XLNetTokenizer('spiece.model'), "
        "sequence_length=128)` (from xlnet_tf import XLNetPreprocessor, XLNetTokenizer)")
  return preprocessor


def packed(head, x, purpose: str):
  """`x` of fit / evaluate / predict / call ("fit", ...: `purpose`) with raw strings replaced
  by the head's features; anything else (ids, a dataset of ids) as it is."""
  if isinstance(x, tf.data.Dataset):
    return _packed_dataset(head, x, purpose)
  if not is_text(x):
    return x
  _check_purpose(head, purpose)
  return text_features(head, x)


def packed_validation_data(head, validation_data):
  """fit's validation_data with raw strings packed: a dataset, or (x, y[, sample_weight])."""
  if isinstance(validation_data, (tuple, list)) and validation_data:
    x, *rest = validation_data
    return (packed(head, x, "evaluate"), *rest)
  return packed(head, validation_data, "evaluate")


def _packed_dataset(head, dataset, purpose: str):
  """A tf.data dataset whose features are strings, mapped to the head's features; any other
  dataset as it is."""
  spec = dataset.element_spec
  features_spec, _ = _features_and_rest(spec if isinstance(spec, tuple) else (spec,))
  if not is_text(features_spec):
    return dataset
  _check_purpose(head, purpose)
  # The errors here, not from inside tf.data's tracing.
  _preprocessor_of(head)
  _named(head, features_spec)

  def pack(*element):
    features, rest = _features_and_rest(element)
    features = text_features(head, features)
    return (features, *rest) if rest else features

  return dataset.map(pack, num_parallel_calls=tf.data.AUTOTUNE)


def _features_and_rest(element):
  """(features, (labels[, sample_weight])) of a dataset element given as a tuple: strings
  only are features alone (one text input, or a tuple of them), else the first part."""
  if all(is_text(part) for part in element):
    return (element if len(element) > 1 else element[0]), ()
  return element[0], tuple(element[1:])


def _check_purpose(head, purpose):
  """Training and evaluation need the head's targets in its features (question answering's
  answer positions), which strings do not give."""
  targets = getattr(head, "training_targets", None)
  if targets and purpose in ("fit", "evaluate"):
    raise UserInputError(
        f"{type(head).__name__}.{purpose} cannot read raw strings: it needs "
        f"{', '.join(targets)} at token positions of the packed window, which "
        "xlnet_tf.tasks.squad's build_features finds; raw (questions, contexts) go to predict")


def _named(head, texts):
  """{text input name: strings} of the texts given to `head` (see the module docstring)."""
  if isinstance(texts, dict):
    return texts
  names = text_input_names(head)
  parts = texts if isinstance(texts, tuple) else (texts,)
  required = 1 if names == PAIR_INPUTS else len(names)
  if not required <= len(parts) <= len(names):
    raise UserInputError(f"{type(head).__name__} reads raw strings as "
                         f"{_LAYOUTS_SHOWN[names]}; got {len(parts)} part(s)")
  if isinstance(parts[0], (str, bytes)):  # one example: a batch of one
    parts = tuple([part] for part in parts)
  return dict(zip(names, parts))
