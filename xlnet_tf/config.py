"""XLNetConfig: the architecture keys of the original `xlnet_config.json` plus run-time options.

The original release splits settings in two: `xlnet_config.json` holds the architecture
(n_layer, d_model, n_head, d_head, d_inner, ff_activation, untie_r, n_token) and the training
scripts take the rest as flags (mem_len, reuse_len, bi_data, clamp_len, same_length, ...). Here
one dataclass holds both; `to_json_file(..., original_keys_only=True)` writes a file the original
code reads, and `from_json_file` reads either kind.

A file or dict must name every architecture key: a size silently taken from the defaults (a
config without d_model building a d_model 768 model) would train or load the wrong model. The
released sizes are reached by name, `XLNetConfig.preset("base")`; keyword construction in Python
keeps the dataclass defaults.
"""

import dataclasses
import math
import numbers
from typing import Any, Dict

from xlnet_tf.utils.errors import UserInputError, is_int, require
from xlnet_tf.utils.json_files import read_json_object, write_json

ARCHITECTURE_KEYS = ("n_layer", "d_model", "n_head", "d_head", "d_inner", "ff_activation",
                     "untie_r", "n_token")
FF_ACTIVATIONS = ("gelu", "gelu_exact", "relu")
# Architecture sizes by name: the released base and large, the main job's demo model, and a
# tiny one for tests. The only place these numbers are written.
SIZE_PRESETS = {
    "base": dict(n_layer=12, d_model=768, n_head=12, d_head=64, d_inner=3072),
    "large": dict(n_layer=24, d_model=1024, n_head=16, d_head=64, d_inner=4096),
    "demo": dict(n_layer=4, d_model=128, n_head=4, d_head=32, d_inner=512),
    "tiny": dict(n_token=1000, n_layer=2, d_model=32, n_head=4, d_head=8, d_inner=64),
}
ATTENTION_TYPES = ("bi", "uni")
# How positions enter attention (Transformer-XL's Table 5 ablation; layers.position_ablations):
# "relative" is XLNet's and Transformer-XL's (the only one the released checkpoints use); the
# others are for left-to-right LMs (attn_type "uni") only.
POS_ENCODINGS = ("relative", "shaw", "absolute_sinusoid", "absolute_learned")
# The largest size, and the most values of one weight: 2^31 - 1, the 32-bit indexing of many
# TensorFlow kernels.
LARGEST_SIZE = 2 ** 31 - 1
INTEGER_FIELDS = ("n_token", "n_layer", "d_model", "n_head", "d_head", "d_inner", "mem_len",
                  "reuse_len", "clamp_len")


def _is_real(value) -> bool:
  """A real number (Python's or NumPy's), not a bool: NaN included (the range checks after it
  are all false for NaN)."""
  return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclasses.dataclass
class XLNetConfig:
  """Architecture and run-time options of an XLNet backbone.

  `ff_activation="gelu"` is the original's tanh approximation, with which the released
  checkpoints were trained; `"gelu_exact"` is the erf form.

  `pos_encoding` (POS_ENCODINGS) other than "relative" builds a Transformer-XL ablation
  model: "shaw" (learned relative key embeddings for distances clipped at clamp_len),
  "absolute_sinusoid" or "absolute_learned" (positions 0..clamp_len within the segment, added
  to the word embeddings). Those need attn_type "uni" without bi_data.

  The first eight fields are the original xlnet_config.json's keys (ARCHITECTURE_KEYS).
  Integer fields accept NumPy integers and store Python ints (so the JSON files stay
  integral). Every field is checked when the config is made (`validate`): an invalid one
  raises UserInputError (a ValueError) naming it.

  Attributes:
    n_token: vocabulary size (32000 for the released models).
    n_layer: number of two-stream layers (12 base, 24 large).
    d_model: hidden size D.
    n_head: attention heads N.
    d_head: size H of each head (N x H need not equal D).
    d_inner: the feed-forward's inner size.
    ff_activation: "gelu" (tanh approximation, the original's), "gelu_exact" (erf) or "relu".
    untie_r: per-layer attention biases r_w / r_r / r_s ([L, N, H]) instead of shared ones.
    mem_len: Transformer-XL memory length M kept between segments (0 = none).
    reuse_len: leading tokens of a segment cached as the next segment's memory (pretraining).
    bi_data: the second half of a batch reads positions backwards (pretraining only).
    clamp_len: relative distances clipped to this (-1 = no clipping).
    same_length: every query attends the same number of keys ('uni' masks).
    attn_type: "bi" (XLNet: the factorization order comes from perm_mask) or "uni" (causal).
    dropout: dropout rate of embeddings, attention outputs, feed-forward and heads.
    dropatt: dropout rate of the attention probabilities.
    init_std: standard deviation of the normal initializer of new weights.
    pos_encoding: "relative" (XLNet) or a Transformer-XL ablation (POS_ENCODINGS, above).
  """
  n_token: int = 32000
  n_layer: int = 12
  d_model: int = 768
  n_head: int = 12
  d_head: int = 64
  d_inner: int = 3072
  ff_activation: str = "gelu"
  untie_r: bool = True
  mem_len: int = 0
  reuse_len: int = 0
  bi_data: bool = False
  clamp_len: int = -1
  same_length: bool = False
  attn_type: str = "bi"
  dropout: float = 0.1
  dropatt: float = 0.1
  init_std: float = 0.02
  pos_encoding: str = "relative"

  def __post_init__(self):
    self.validate()
    for name in INTEGER_FIELDS:
      setattr(self, name, int(getattr(self, name)))

  def validate(self) -> None:
    """Checks the type and range of every field, and the sizes' products.

    Raises:
      UserInputError: (a ValueError) naming the first invalid field, or the field that makes a
        weight larger than one tensor holds (2^31 - 1 values).
    """
    for name in ("n_token", "n_layer", "d_model", "n_head", "d_head", "d_inner"):
      value = getattr(self, name)
      require(is_int(value) and 0 < value <= LARGEST_SIZE, f"XLNetConfig.{name}",
              "a positive integer up to 2^31 - 1", repr(value))
    for name in ("mem_len", "reuse_len"):
      value = getattr(self, name)
      require(is_int(value) and 0 <= value <= LARGEST_SIZE, f"XLNetConfig.{name}",
              "an integer >= 0 (up to 2^31 - 1)", repr(value))
    require(is_int(self.clamp_len) and -1 <= self.clamp_len <= LARGEST_SIZE,
            "XLNetConfig.clamp_len", "an integer >= -1 (-1 = no clamping)", repr(self.clamp_len))
    # Sizes each valid can still make a weight no tensor holds: TensorFlow indexes the
    # elements of many kernels (gathers, GPU launches) with 32-bit integers.
    for weight, dimensions in (("the word embedding", ("n_token", "d_model")),
                               ("each attention projection", ("d_model", "n_head", "d_head")),
                               ("each feed-forward kernel", ("d_model", "d_inner"))):
      sizes = {name: int(getattr(self, name)) for name in dimensions}
      if math.prod(sizes.values()) > LARGEST_SIZE:
        shape = " x ".join(f"{name} {size}" for name, size in sizes.items())
        raise UserInputError(
            f"XLNetConfig.{max(sizes, key=sizes.get)}: {weight} ({shape} = "
            f"{math.prod(sizes.values()):.2g} values) exceeds 2^31 - 1 values, more than one "
            "tensor holds; check the sizes")
    require(self.d_model % 2 == 0, "XLNetConfig.d_model",
            "even (the sinusoid encoding concatenates sin and cos halves)", repr(self.d_model))
    for name in ("untie_r", "bi_data", "same_length"):
      value = getattr(self, name)
      require(isinstance(value, bool), f"XLNetConfig.{name}", "a bool", repr(value))
    require(self.ff_activation in FF_ACTIVATIONS, "XLNetConfig.ff_activation",
            f"one of {FF_ACTIVATIONS}", repr(self.ff_activation))
    require(self.attn_type in ATTENTION_TYPES, "XLNetConfig.attn_type",
            f"one of {ATTENTION_TYPES}", repr(self.attn_type))
    for name in ("dropout", "dropatt"):
      value = getattr(self, name)
      require(_is_real(value) and 0.0 <= value < 1.0, f"XLNetConfig.{name}",
              "a rate in [0, 1)", repr(value))
    require(_is_real(self.init_std) and 0 < self.init_std < math.inf, "XLNetConfig.init_std",
            "a positive finite float", repr(self.init_std))
    require(self.pos_encoding in POS_ENCODINGS, "XLNetConfig.pos_encoding",
            f"one of {POS_ENCODINGS}", repr(self.pos_encoding))
    if self.pos_encoding != "relative":
      require(self.attn_type == "uni" and not self.bi_data, "XLNetConfig.pos_encoding",
              "'relative' unless attn_type is 'uni' without bi_data (the other encodings are "
              "Transformer-XL's left-to-right ablations; XLNet's two streams are defined with "
              "relative positions)", repr(self.pos_encoding))
    if self.pos_encoding in ("shaw", "absolute_learned"):
      require(self.clamp_len > 0, "XLNetConfig.clamp_len",
              f"> 0 with pos_encoding {self.pos_encoding!r} (the largest distance or position "
              "its learned table holds)", repr(self.clamp_len))

  # ---- presets -------------------------------------------------------------------------------
  @classmethod
  def preset(cls, name: str, **overrides) -> "XLNetConfig":
    """A config of a named size: a released model's, the demo's or the tests'.

    Args:
      name: `base` (12x768) or `large` (24x1024) as released, `demo` (4x128, the main job's)
        or `tiny` (2x32, n_token 1000, for tests); see SIZE_PRESETS.
      **overrides: fields replacing the preset's and the defaults (mem_len, dropout, ...).

    Returns:
      The XLNetConfig.

    Raises:
      UserInputError: for an unknown name, or an override `validate` refuses.
    """
    if name not in SIZE_PRESETS:
      raise UserInputError(f"Unknown XLNet preset {name!r}; choose one of {sorted(SIZE_PRESETS)}.")
    return cls(**{**SIZE_PRESETS[name], **overrides})

  def for_finetuning(self, **overrides) -> "XLNetConfig":
    """A copy for fine-tuning and serving: no memory, no backward half-batches.

    The copy has mem_len 0, reuse_len 0 and bi_data off (one sequence read at a time, no
    memory carried between batches), then `overrides`.

    Args:
      **overrides: fields to set in the copy (dropout, ...; mem_len for a classifier of long
        documents).

    Returns:
      A new XLNetConfig; this one is unchanged.

    Raises:
      UserInputError: for an override `validate` refuses.

    >>> XLNetConfig.preset("tiny", mem_len=16, reuse_len=8, bi_data=True).for_finetuning(
    ...     dropout=0.0).mem_len
    0
    """
    return dataclasses.replace(self, **{"mem_len": 0, "reuse_len": 0, "bi_data": False,
                                        **overrides})

  # ---- (de)serialization ---------------------------------------------------------------------
  def to_dict(self, original_keys_only: bool = False) -> Dict[str, Any]:
    """The config as a dict of its fields.

    Args:
      original_keys_only: only the architecture keys (ARCHITECTURE_KEYS), those of the
        original xlnet_config.json; else every field.

    Returns:
      {field name: value}, a new dict.
    """
    values = dataclasses.asdict(self)
    if original_keys_only:
      return {key: values[key] for key in ARCHITECTURE_KEYS}
    return values

  @classmethod
  def from_dict(cls, values: Dict[str, Any], source: str = "config", **overrides) -> "XLNetConfig":
    """A config from a dict of fields, which must name every architecture key.

    Each of ARCHITECTURE_KEYS must be in `values` or `overrides`; the other fields take their
    defaults.

    Args:
      values: {field name: value}, e.g. a parsed xlnet_config.json.
      source: what `values` came from (a file name), for the messages.
      **overrides: fields replacing those of `values`.

    Returns:
      The XLNetConfig.

    Raises:
      UserInputError: naming `source` and the unknown or missing keys, or the invalid field.
    """
    known = {field.name for field in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
      raise UserInputError(f"{source}: unknown XLNet config key(s) {unknown}; known keys are "
                           f"{sorted(known)}.")
    missing = [key for key in ARCHITECTURE_KEYS if key not in values and key not in overrides]
    if missing:
      raise UserInputError(f"{source}: missing the XLNet config key(s) {missing}; a config "
                           f"must name every architecture key ({' '.join(ARCHITECTURE_KEYS)}) "
                           "(a released size's file: XLNetConfig.preset('base').to_json_file)")
    try:
      return cls(**{**values, **overrides})
    except ValueError as error:
      raise UserInputError(f"{source}: {error}") from None

  @classmethod
  def from_json_file(cls, path: str, **overrides) -> "XLNetConfig":
    """Reads an original `xlnet_config.json`, or one written by `to_json_file`.

    The file must name every architecture key (see `from_dict`); run-time keys it lacks take
    their defaults.

    Args:
      path: the JSON file (local, or remote: gs://...).
      **overrides: fields replacing the file's (run-time options: mem_len, dropout, ...).

    Returns:
      The XLNetConfig.

    Raises:
      FileNotFoundError: when there is no file at `path`.
      UserInputError: naming the file when it is not a JSON object, or when a key is missing,
        unknown or invalid.
    """
    values = read_json_object(path, expected="a JSON object of config keys")
    return cls.from_dict(values, source=path, **overrides)

  def to_json_file(self, path: str, original_keys_only: bool = False) -> None:
    """Writes the config as indented JSON with sorted keys, whole or not at all.

    Args:
      path: the file to write (local, or remote: gs://...); its directory is created.
      original_keys_only: only the architecture keys (ARCHITECTURE_KEYS), a file the original
        code reads; else every field, which `from_json_file` reads back as it was.
    """
    write_json(path, self.to_dict(original_keys_only), sort_keys=True)
