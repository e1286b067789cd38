"""XLNetHead: what every task model over an XLNetModel shares (construction, serialization,
pretrained directories, raw strings through its preprocessor)."""

import inspect

from absl import logging
import keras
import tensorflow as tf

from xlnet_tf.checkpoints import own, pretrained
from xlnet_tf.checkpoints.assign import CheckpointMismatchError
from xlnet_tf.config import XLNetConfig
from xlnet_tf.heads import text_inputs
from xlnet_tf.heads.summary import SequenceSummary
from xlnet_tf.modeling.backbone import XLNetModel
from xlnet_tf.modeling.layers import quantization
from xlnet_tf.modeling.layers.dropout import FastDropout
from xlnet_tf.text.preprocessor import XLNetPreprocessor, saved_preprocessor
from xlnet_tf.text.tokenizer import check_vocabulary, kept_tokenizer
from xlnet_tf.utils.errors import UserInputError, require


# A head's layers that hold weights of their own and stay float when it is quantized
# (XLNetHead.quantize): the 'attn' summary's kernels are one query's attention over the last
# layer (its `summary` Dense is quantized).
FLOAT_LAYERS = (keras.layers.LayerNormalization, FastDropout, SequenceSummary)


class XLNetHead(keras.Model):
  """A task model with an XLNetModel at `self.backbone`.

  Subclasses pass their own constructor arguments through `head_config()` for serialization,
  and name their weights for checkpoints with `original_head_variables()` (original TF1
  names) and, where Hugging Face has the head, `huggingface_head_names()`.
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
    unused = self._unused_variable_ids()
    return [variable for variable in super().trainable_weights if id(variable) not in unused]

  @property
  def trainable_variables(self):
    unused = self._unused_variable_ids()
    return [variable for variable in super().trainable_variables if id(variable) not in unused]

  @property
  def non_trainable_weights(self):
    trained = {id(variable) for variable in self.trainable_weights}
    return [variable for variable in self.weights if id(variable) not in trained]

  @property
  def non_trainable_variables(self):
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
    """The XLNetPreprocessor that turns raw strings into this head's inputs in call, fit,
    evaluate and predict (layouts: xlnet_tf.heads.text_inputs). By default one over
    `.tokenizer` (sequence_length 128; a long-document classifier's max_segments), or the one
    a pretrained directory saved; None without a tokenizer. Settable (None: strings refused).
    Not a sublayer: it has no weights and stays out of weight files and SavedModels; a .keras
    archive keeps its files (save_assets)."""
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
    """Keras' fit; raw strings in `x` or validation_data go through `.preprocessor`. A
    quantized head is refused (its int8 kernels take no gradient: only the biases and
    LayerNorms would move)."""
    if self.quantization is not None:
      raise ValueError(f"{type(self).__name__} '{self.name}' is quantized "
                       f"({self.quantization}), for inference: fit the float model, then "
                       "quantize")
    if kwargs.get("validation_data") is not None:
      kwargs["validation_data"] = text_inputs.packed_validation_data(
          self, kwargs["validation_data"])
    return super().fit(text_inputs.packed(self, x, "fit"), y, *args, **kwargs)

  def evaluate(self, x=None, y=None, *args, **kwargs):
    """Keras' evaluate; raw strings in `x` go through `.preprocessor`."""
    return super().evaluate(text_inputs.packed(self, x, "evaluate"), y, *args, **kwargs)

  def predict(self, x, *args, **kwargs):
    """Keras' predict; raw strings in `x` go through `.preprocessor`."""
    return super().predict(text_inputs.packed(self, x, "predict"), *args, **kwargs)

  # ---- serialization ------------------------------------------------------------------------
  def head_config(self) -> dict:
    return {}

  def get_config(self):
    config = {"backbone": keras.saving.serialize_keras_object(self.backbone), "name": self.name,
              **self.head_config()}
    if self.quantization is not None:  # only then: a float head's config stays as it was
      config["quantization"] = self.quantization
    return config

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    mode = config.pop("quantization", None)
    head = cls(keras.saving.deserialize_keras_object(config.pop("backbone")), **config)
    if mode is not None:  # the backbone comes quantized from its own config
      head._quantize_head_layers(mode, None)
    return head

  # ---- .keras archives ----------------------------------------------------------------------
  def save_assets(self, dir_path):
    """Keras' hook when it writes a .keras archive (`save`, ModelCheckpoint): the files
    save_pretrained keeps of the preprocessor (spiece.model, tokenizer_config.json,
    preprocessor.json) or, without one, of the tokenizer; `load_assets` reads them back, so
    that a head from keras.models.load_model reads raw strings as this one does."""
    preprocessor = self.preprocessor
    if preprocessor is not None:
      preprocessor.save_pretrained(dir_path)
    elif self.tokenizer is not None:
      self.tokenizer.save_pretrained(dir_path)

  def load_assets(self, dir_path):
    """Keras' hook when it loads a .keras archive: `.tokenizer` and `.preprocessor` as
    save_assets kept them (as from_pretrained reads them from a directory)."""
    tokenizer = kept_tokenizer(dir_path)  # Keras removes dir_path once the model is loaded
    if tokenizer is None:
      return
    self.tokenizer = tokenizer
    preprocessor = saved_preprocessor(dir_path, tokenizer)
    if preprocessor is not None:
      self.preprocessor = preprocessor

  # ---- quantization ------------------------------------------------------------------------
  def quantize(self, mode=None, config=None, filters=None, **kwargs):
    """Keras' Model.quantize, for inference: the backbone as XLNetModel.quantize says, and the
    head's Dense layers as Keras' int8 Dense (kernel int8 per output unit, activations int8
    per row, bias float). Float: the tied LM projection (the word embedding), the 'attn'
    summary's q/k/v/o kernels (one query over the last layer), LayerNorms, biases. Other modes,
    custom configs and `filters` raise before anything changes, as does quantizing twice.
    Saved as a .keras file, not with save_pretrained."""
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
    """This head from a pretrained directory or Hugging Face hub id, in any layout (see
    XLNetModel.from_pretrained).

    With the head's own weights when the directory holds this head (own: head.json of this
    class; Hugging Face: config.json's "architectures" is its transformers class, e.g.
    XLNetForSequenceClassification with num_labels / id2label); otherwise (a backbone, or a
    pretrained language model: XLNetPretrainer, transformers' XLNetLMHeadModel) a new head
    over the loaded backbone, which one logged line says. A directory holding another task's
    head is an error naming both.

    `arguments`: the head's constructor arguments (num_classes, summary_type, ...) and
    XLNetConfig run-time options (mem_len, dropout, ...). A stored head's arguments must agree
    with the ones given (except RUN_TIME_ARGUMENTS). `.tokenizer`: the directory's tokenizer
    or None; `.preprocessor`: over it, as its preprocessor.json says (sequence_length, ...);
    `.labels` (classifier, tagger): labels.json or id2label, or None.
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
    """Writes a directory from_pretrained reads back: xlnet_config.json, model.weights.h5,
    head.json; labels.json (thresholds.json) when `.labels` is set; spiece.model +
    tokenizer_config.json + preprocessor.json when `.preprocessor` is (else spiece.model +
    tokenizer_config.json when `.tokenizer` is). Returns it. A quantized head is refused (the
    format holds float weights)."""
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
