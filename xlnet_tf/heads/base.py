"""XLNetHead: what every task model over an XLNetModel shares (construction, serialization,
pretrained directories, raw strings through its preprocessor)."""

import inspect

from absl import logging
import keras
import tensorflow as tf

from xlnet_tf.checkpoints import own, pretrained
from xlnet_tf.checkpoints.assign import CheckpointMismatchError
from xlnet_tf.checkpoints.labels import load_head_labels, save_head_labels
from xlnet_tf.config import XLNetConfig
from xlnet_tf.heads import text_inputs
from xlnet_tf.heads.summary import SequenceSummary
from xlnet_tf.modeling.backbone import XLNetModel
from xlnet_tf.modeling.int8_inference import Int8InferenceTraces
from xlnet_tf.modeling.one_batch_predict import OneBatchPredict
from xlnet_tf.modeling.layers import quantization
from xlnet_tf.modeling.layers.dropout import FastDropout
from xlnet_tf.text.preprocessor import XLNetPreprocessor, saved_preprocessor
from xlnet_tf.text.tokenizer import check_vocabulary, kept_tokenizer
from xlnet_tf.utils.errors import UserInputError, require


# A head's layers that hold weights of their own and stay float when it is quantized
# (XLNetHead.quantize): the 'attn' summary's kernels are one query's attention over the last
# layer (its `summary` Dense is quantized).
FLOAT_LAYERS = (keras.layers.LayerNormalization, FastDropout, SequenceSummary)


class XLNetHead(Int8InferenceTraces, OneBatchPredict, keras.Model):
  """A task model with an XLNetModel at `self.backbone`.

  Subclasses pass their own constructor arguments through `head_config()` for serialization,
  and name their weights for checkpoints with `original_head_variables()` (original TF1
  names) and, where Hugging Face has the head, `huggingface_head_names()`.

  Args:
    backbone: the XLNetModel, or an XLNetConfig (or a dict of its fields) to build one from.
    **kwargs: Keras Model arguments (name, default "model", the original's top-level scope).
  """

  # Constructor arguments that change no weight, which from_pretrained may set differently
  # from a stored head's (e.g. the beam of answer spans).
  RUN_TIME_ARGUMENTS = ()
  # Backbone variables the head's outputs never depend on (the query stream's `mask_emb` for
  # a head that reads the content stream only). They stay weights (checkpoints hold them and
  # load into them) but are not trained: fit, custom loops and optimizers see no variable
  # that can have no gradient (Keras would warn at every fit that it has none).
  UNUSED_BACKBONE_VARIABLES = ()
  # XLNetConfig options from_pretrained loads this head with unless given: a task reads each
  # text forward once, while bi_data (pretraining's second half of every batch read backward,
  # stored in a pretrained backbone's config) would read half of a batch backward.
  LOADED_CONFIG_DEFAULTS = {"bi_data": False}

  def __init__(self, backbone, **kwargs):
    if isinstance(backbone, (dict, XLNetConfig)):
      backbone = XLNetModel(backbone)
    kwargs.setdefault("name", "model")  # the original's top-level scope
    super().__init__(**kwargs)
    self.backbone = backbone
    # The XLNetTokenizer save_pretrained writes beside the weights: the backbone's, unless
    # from_pretrained sets the directory's.
    self.tokenizer = getattr(backbone, "tokenizer", None)
    # Heads create every weight in __init__. Marked built now, Keras never traces them on
    # placeholders of its default (float) dtype, which token ids cannot take.
    self.built = True

  # ---- what training updates ---------------------------------------------------------------
  def _unused_variable_ids(self):
    backbone = self.__dict__.get("backbone")  # None while Keras' constructor runs
    return {id(getattr(backbone, name)) for name in self.UNUSED_BACKBONE_VARIABLES
            if backbone is not None}

  @property
  def trainable_weights(self):
    """Keras' trainable weights, less UNUSED_BACKBONE_VARIABLES (no gradient reaches them)."""
    unused = self._unused_variable_ids()
    return [variable for variable in super().trainable_weights if id(variable) not in unused]

  @property
  def trainable_variables(self):
    """Keras' trainable variables, less UNUSED_BACKBONE_VARIABLES (no gradient reaches them)."""
    unused = self._unused_variable_ids()
    return [variable for variable in super().trainable_variables if id(variable) not in unused]

  @property
  def non_trainable_weights(self):
    """Every weight not in trainable_weights (UNUSED_BACKBONE_VARIABLES included)."""
    trained = {id(variable) for variable in self.trainable_weights}
    return [variable for variable in self.weights if id(variable) not in trained]

  @property
  def non_trainable_variables(self):
    """Every variable not in trainable_variables (UNUSED_BACKBONE_VARIABLES included)."""
    trained = {id(variable) for variable in self.trainable_variables}
    return [variable for variable in self.variables if id(variable) not in trained]

  # ---- raw strings --------------------------------------------------------------------------
  def __setattr__(self, name, value):
    if name == "preprocessor":  # past Keras' tracking: see the property
      object.__setattr__(self, name, value)
    else:
      super().__setattr__(name, value)

  @property
  def preprocessor(self):
    """The XLNetPreprocessor that turns raw strings into this head's inputs.

    Call, fit, evaluate and predict pack raw strings with it (layouts:
    xlnet_tf.heads.text_inputs). By default one over `.tokenizer` (sequence_length 128; a
    long-document classifier's max_segments), or the one a pretrained directory saved; None
    without a tokenizer. Settable to an XLNetPreprocessor whose tokenizer fits the model's
    vocabulary (else UserInputError), or to None (raw strings are then refused). Not a
    sublayer: it has no weights and stays out of weight files and SavedModels; save_pretrained
    writes its files (preprocessor.json) and a .keras archive keeps them (save_assets).
    """
    chosen = self.__dict__.get("_chosen_preprocessor")
    if chosen is not None:
      return chosen[0]
    if self.tokenizer is None:
      return None
    default = self.__dict__.get("_default_preprocessor")
    if default is None or default.tokenizer is not self.tokenizer:
      with tf.init_scope():  # eager constants, even when first asked for inside a graph
        default = XLNetPreprocessor(self.tokenizer,
                                    num_segments=getattr(self, "max_segments", 1))
      self.__dict__["_default_preprocessor"] = default
    return default

  @preprocessor.setter
  def preprocessor(self, preprocessor):
    require(preprocessor is None or isinstance(preprocessor, XLNetPreprocessor),
            f"{type(self).__name__}.preprocessor", "an XLNetPreprocessor or None",
            type(preprocessor).__name__)
    if preprocessor is not None:
      check_vocabulary(preprocessor.tokenizer, self.backbone.config)
    self.__dict__["_chosen_preprocessor"] = (preprocessor,)

  def __call__(self, *args, **kwargs):
    if args and text_inputs.is_text(args[0]):
      args = (text_inputs.packed(self, args[0], "call"), *args[1:])
    return super().__call__(*args, **kwargs)

  def fit(self, x=None, y=None, *args, **kwargs):
    """Keras' fit, which also takes raw strings: `.preprocessor` packs them.

    Args:
      x: what Keras' fit takes (a dict of arrays or tensors, a tf.data.Dataset, ...), or raw
        strings in the head's layout (xlnet_tf.heads.text_inputs: texts, a tuple of texts,
        a dict by text input names, or a dataset of them).
      y: the targets, as Keras' fit takes them.
      *args: Keras' fit's other positional arguments.
      **kwargs: Keras' fit's keyword arguments; raw strings in validation_data are packed
        too.

    Returns:
      Keras' History of the run.

    Raises:
      ValueError: for a quantized head (its int8 kernels take no gradient: only the biases
        and LayerNorms would move).
      UserInputError: for raw strings without a preprocessor, or that question answering
        cannot train on (its targets are token positions).
    """
    if self.quantization is not None:
      raise ValueError(f"{type(self).__name__} '{self.name}' is quantized "
                       f"({self.quantization}), for inference: fit the float model, then "
                       "quantize")
    if kwargs.get("validation_data") is not None:
      kwargs["validation_data"] = text_inputs.packed_validation_data(
          self, kwargs["validation_data"])
    return super().fit(text_inputs.packed(self, x, "fit"), y, *args, **kwargs)

  def evaluate(self, x=None, y=None, *args, **kwargs):
    """Keras' evaluate, which also takes raw strings: `.preprocessor` packs them.

    Args:
      x: what Keras' evaluate takes, or raw strings (see `fit`).
      y: the targets, as Keras' evaluate takes them.
      *args: Keras' evaluate's other positional arguments.
      **kwargs: Keras' evaluate's keyword arguments.

    Returns:
      Keras' result: the loss and metrics (a scalar, a list, or a dict with return_dict).

    Raises:
      UserInputError: for raw strings without a preprocessor, or that question answering
        cannot evaluate on.
    """
    return super().evaluate(text_inputs.packed(self, x, "evaluate"), y, *args, **kwargs)

  def predict(self, x, *args, **kwargs):
    """Keras' predict, which also takes raw strings: `.preprocessor` packs them.

    Args:
      x: what Keras' predict takes, or raw strings (see `fit`).
      *args: Keras' predict's other positional arguments.
      **kwargs: Keras' predict's keyword arguments.

    Returns:
      The outputs as NumPy arrays (a dict of them for a head returning a dict).

    Raises:
      UserInputError: for raw strings without a preprocessor.
    """
    return super().predict(text_inputs.packed(self, x, "predict"), *args, **kwargs)

  # ---- serialization ------------------------------------------------------------------------
  def head_config(self) -> dict:
    """The head's constructor arguments besides the backbone, as head.json stores them.

    Returns:
      {argument name: value}; {} here, each head lists its own.
    """
    return {}

  def get_config(self):
    """The constructor's arguments, for Keras' serialization (.keras files, clone_model).

    Returns:
      {"backbone": the serialized XLNetModel, "name", and head_config()'s arguments}, and
      "quantization" (the mode) for a quantized head only.
    """
    config = {"backbone": keras.saving.serialize_keras_object(self.backbone), "name": self.name,
              **self.head_config()}
    if self.quantization is not None:  # only then: a float head's config stays as it was
      config["quantization"] = self.quantization
    return config

  @classmethod
  def from_config(cls, config):
    """The head a `get_config` dict describes, quantized when it records a mode.

    Args:
      config: a dict `get_config` returned.

    Returns:
      A new head over the deserialized backbone, with initialized weights (Keras loads the
      stored ones next).
    """
    config = dict(config)
    mode = config.pop("quantization", None)
    head = cls(keras.saving.deserialize_keras_object(config.pop("backbone")), **config)
    if mode is not None:  # the backbone comes quantized from its own config
      head._quantize_head_layers(mode, None)
    return head

  # ---- .keras archives ----------------------------------------------------------------------
  def save_assets(self, dir_path):
    """Writes the text files of `.preprocessor` and the labels into a .keras archive (Keras' hook).

    Keras calls it when it writes a .keras archive (`save`, ModelCheckpoint): the files
    save_pretrained keeps of the preprocessor (spiece.model, tokenizer_config.json,
    preprocessor.json) or, without one, of the tokenizer, and the label names (labels.json,
    a multi-label head's thresholds.json); `load_assets` reads them back, so that a head from
    keras.models.load_model reads raw strings and names its classes as this one does.

    Args:
      dir_path: the archive's assets folder, which Keras gives.
    """
    preprocessor = self.preprocessor
    if preprocessor is not None:
      preprocessor.save_pretrained(dir_path)
    elif self.tokenizer is not None:
      self.tokenizer.save_pretrained(dir_path)
    save_head_labels(dir_path, self)

  def load_assets(self, dir_path):
    """Sets `.tokenizer`, `.preprocessor` and the labels from a .keras archive (Keras' hook).

    As save_assets kept them, the way from_pretrained reads them from a directory; nothing
    changes of what the archive does not hold.

    Args:
      dir_path: the assets folder Keras extracted (removed once the model is loaded: the
        tokenizer keeps a copy of its files).
    """
    load_head_labels(dir_path, self)
    tokenizer = kept_tokenizer(dir_path)  # Keras removes dir_path once the model is loaded
    if tokenizer is None:
      return
    self.tokenizer = tokenizer
    preprocessor = saved_preprocessor(dir_path, tokenizer)
    if preprocessor is not None:
      self.preprocessor = preprocessor

  # ---- quantization ------------------------------------------------------------------------
  def quantize(self, mode=None, config=None, filters=None, **kwargs):
    """Quantizes the backbone and the head's projections to int8 in place, for inference.

    The backbone as XLNetModel.quantize says, and the head's Dense layers as Keras' int8
    Dense (kernel int8 per output unit, activations int8 per row, bias float).
    XLNetPretrainer's output projection, tied to the word embedding, reads an int8 copy of it
    (a scale per token); the embedding itself stays float for the input lookup. Also float:
    the 'attn' summary's q/k/v/o kernels (one query over the last layer), LayerNorms, biases.
    A quantized head is for inference: `fit` refuses it.

    The quantized head is saved either way, and loads back quantized: `head.save("x.keras")`
    (keras.models.load_model) or `save_pretrained` (the int8 weights and quantization.json;
    this class's from_pretrained).

    Args:
      mode: "int8", the one mode implemented (None when `config` gives it).
      config: None, or Keras' default Int8QuantizationConfig(); a custom one is refused.
      filters: must be None: every projection is quantized.
      **kwargs: Keras' type_check is accepted and ignored; any other is refused.

    Raises:
      NotImplementedError: for another mode (int4, float8, ...), a custom config, or a head
        layer holding weights that this method does not know how to quantize.
      ValueError: for `filters`, a head already quantized, or an unexpected argument.
        Nothing is changed when it raises.
    """
    kwargs.pop("type_check", None)
    if kwargs:
      raise ValueError(f"{type(self).__name__}.quantize: unexpected arguments {sorted(kwargs)}")
    quantization.check_request(self, mode, config, filters, quantized_mode=self.quantization)
    self._quantize_head_layers(mode, config)  # checks them all before changing one
    self.backbone.quantize(mode, config=config)
    self.train_function = self.test_function = self.predict_function = None

  @property
  def quantization(self):
    """The quantization mode of the backbone or the head's layers ("int8"), or None."""
    modes = sorted({layer.quantization_mode for layer in self._head_layers()
                    if layer.quantization_mode})
    return self.backbone.quantization or (modes[0] if modes else None)

  def _head_layers(self):
    """The head's own layers, at any depth, without the backbone's."""
    backbone_layers = {id(layer) for layer in self.backbone._flatten_layers()}
    return [layer for layer in self._flatten_layers(include_self=False)
            if id(layer) not in backbone_layers]

  def _quantize_head_layers(self, mode, config):
    """Quantizes the head's Dense layers (after checking that every layer holding weights is
    one this method knows: a Dense, or one that stays float)."""
    dense = [layer for layer in self._head_layers() if type(layer) is keras.layers.Dense]
    unknown = [layer for layer in self._head_layers()
               if type(layer) is not keras.layers.Dense and layer.weights
               and not isinstance(layer, FLOAT_LAYERS)]
    if unknown:
      raise NotImplementedError(
          f"{type(self).__name__} '{self.name}': quantize(mode={mode!r}) cannot quantize "
          f"{', '.join(f'{type(layer).__name__} {layer.name!r}' for layer in unknown)}. "
          "Nothing was changed")
    with quantization.one_garbage_collection():
      for layer in dense:
        layer.quantize(mode, config=config)

  # ---- pretrained directories --------------------------------------------------------------
  @classmethod
  def from_pretrained(cls, path: str, **arguments):
    """This head from a pretrained directory or Hugging Face hub id, in any layout.

    The layouts are XLNetModel.from_pretrained's. With the head's own weights when the
    directory holds this head (own: head.json of this class; Hugging Face: config.json's
    "architectures" is its transformers class, e.g. XLNetForSequenceClassification with
    num_labels / id2label); otherwise (a backbone, or a pretrained language model:
    XLNetPretrainer, transformers' XLNetLMHeadModel) a new head over the loaded backbone, its
    own weights initialized at random, which one logged warning says (a quantized backbone's
    directory gives that backbone quantized: the head is then for inference, not fit). A
    directory holding another task's head is an error naming both. An own directory of this
    head quantized (save_pretrained after quantize) gives it back quantized. The config's
    bi_data is off unless given (LOADED_CONFIG_DEFAULTS; XLNetPretrainer keeps the stored value).

    Args:
      path: a local or remote (gs://...) directory, a TF1 checkpoint prefix
        (DIR/xlnet_model.ckpt), or a Hugging Face hub id.
      **arguments: the head's constructor arguments (num_classes, summary_type, ...) and
        XLNetConfig run-time options (mem_len, dropout, ...). A stored head's arguments must
        agree with the ones given (except RUN_TIME_ARGUMENTS); a new head needs its required
        ones (num_classes, num_labels).

    Returns:
      The head. `.tokenizer`: the directory's tokenizer, or None; `.preprocessor`: over it,
      as its preprocessor.json says (sequence_length, ...); `.labels` (classifier, tagger):
      labels.json or id2label, or None; `.thresholds` (multi-label classifier):
      thresholds.json's when the directory has them.

    Raises:
      FileNotFoundError: when `path` is neither a directory nor a hub id that can be fetched.
      UserInputError: when `path` is no pretrained directory, an argument is unknown or sets
        an architecture key, or a new head lacks a required argument.
      CheckpointMismatchError: when the directory holds another task's head (or a quantized
        one, read as a backbone), the arguments given contradict the stored head's, or the
        weights do not fit (nothing is loaded).
    """
    caller = f"{cls.__name__}.from_pretrained"
    head_arguments, config_overrides = pretrained.split_arguments(cls.__init__, arguments,
                                                                  caller)
    place = pretrained.locate(path)
    config = pretrained.stored_config(place, {**cls.LOADED_CONFIG_DEFAULTS, **config_overrides})
    stored = pretrained.stored_head(place)
    if stored is not None and stored.class_name == cls.__name__:
      _check_agreement(cls, stored, head_arguments, place)
      head = own.build_stored_head(cls, config, {**stored.arguments, **head_arguments},
                                   stored.source)
      pretrained.load_head(head, place)
      labels, thresholds = stored.labels, stored.thresholds
    elif stored is None or stored.is_pretraining:
      head = _new_head(cls, config, head_arguments, place, caller)
      pretrained.load_backbone(head.backbone, place)
      holds = "a backbone only" if stored is None else stored.described_as
      logging.warning("%s: holds %s; a new %s over its backbone, its head's weights initialized "
                      "at random (train them before use)", place.name, holds, cls.__name__)
      labels = thresholds = None
    else:
      raise CheckpointMismatchError(
          f"{caller}: {place.name} holds {stored.described_as}, not an {cls.__name__}; load it "
          "with its own class, or its backbone with XLNetModel.from_pretrained")
    head.tokenizer = pretrained.stored_tokenizer(place, config)
    preprocessor = pretrained.stored_preprocessor(place, head.tokenizer)
    if preprocessor is not None:
      head.preprocessor = preprocessor
    if labels is not None:
      head.labels = labels
    if thresholds is not None:
      head.thresholds = thresholds
    return head

  def save_pretrained(self, directory: str) -> str:
    """Writes a directory that `from_pretrained` reads back.

    The files: xlnet_config.json, model.weights.h5 and head.json (the class and head_config());
    labels.json (and a multi-label classifier's thresholds.json) when `.labels` is set;
    spiece.model, tokenizer_config.json and preprocessor.json of `.preprocessor` (by default
    one over `.tokenizer`), or only the tokenizer's two when the preprocessor is set to None.
    The directory appears whole or not at all; an existing model directory there is replaced
    whole (checkpoints.save_pretrained).

    A quantized head (after `quantize("int8")`) is saved as it is: model.weights.h5 holds its
    int8 kernels and float32 scales, and quantization.json ({"mode": "int8"}) says so. This
    class's `from_pretrained` quantizes the new float head before loading those weights: the
    head comes back quantized, computing the same outputs. The weights load into that head
    only: XLNetModel.from_pretrained and other heads' from_pretrained (as a backbone),
    fine-tuning's --init_checkpoint and the conversion to other formats refuse the directory.

    Args:
      directory: where to write (local or remote); created, or replaced if it holds a model.

    Returns:
      `directory`.

    Raises:
      UserInputError: when `directory` holds files that are not a model's, or `.labels` does
        not name one label per class.
    """
    return own.save_pretrained(self, directory)


def _check_agreement(cls, stored, given, place) -> None:
  """The arguments given equal the stored head's (its defaults where it stores none)."""
  defaults = {name: parameter.default
              for name, parameter in inspect.signature(cls.__init__).parameters.items()}
  contradictions = [
      f"{key}={value!r} against the stored {stored.arguments.get(key, defaults.get(key))!r}"
      for key, value in sorted(given.items())
      if key not in cls.RUN_TIME_ARGUMENTS
      and value != stored.arguments.get(key, defaults.get(key))]
  if contradictions:
    raise CheckpointMismatchError(
        f"{cls.__name__}.from_pretrained: {', '.join(contradictions)}: {place.name} holds "
        f"{stored.described_as}; leave them out to load it, or build a new head over "
        "XLNetModel.from_pretrained")


def _new_head(cls, config, arguments, place, caller):
  """A new head of `cls` over a new backbone, its required arguments named when missing."""
  parameters = list(inspect.signature(cls.__init__).parameters.values())[2:]  # self, backbone
  missing = [parameter.name for parameter in parameters
             if parameter.default is parameter.empty and parameter.name not in arguments
             and parameter.kind not in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL)]
  if missing:
    raise UserInputError(f"{caller}: {place.name} holds no {cls.__name__} to read them from; "
                         f"a new one needs {', '.join(missing)}")
  return cls(config, **arguments)
