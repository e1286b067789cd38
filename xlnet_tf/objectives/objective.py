"""The pretraining objectives, one object each: what a run of it needs and how its data look.

- perm: XLNet's permutation LM; the query stream predicts the targets of A/B examples, stored
  with a factorization rank per position (`permutation`).
- mlm: BERT's masked LM on the same backbone (the paper's Table 6 baseline); the content stream
  at each target predicts it, stored with the id shown there (`masked_lm`).
- clm: Transformer-XL's left-to-right LM on a 'uni' backbone; consecutive segments of the
  rows, every position predicting the next token (`lm_streams`).

An objective is named by a string everywhere it is stored or given (flags, record_info.json,
`XLNetPretrainer(objective=...)`, saved heads); `named(name)` gives its object, which the data
stage, the reader, the head, the loop and the CLIs ask instead of comparing names. A new
objective is one more object in `OBJECTIVES`.

Below the heads: this module imports only `errors` and the data modules of the objectives
(NumPy / TensorFlow ops), never the model, heads, records or the loop.
"""

import abc
import dataclasses
from typing import Dict, Mapping, Optional, Tuple

import numpy as np
import tensorflow as tf

from xlnet_tf.utils.errors import UserInputError, require
from xlnet_tf.objectives import lm_streams, masked_lm, permutation

QUERY_STREAM, CONTENT_STREAM = "query", "content"
IDS = "ids"  # a stored feature in the vocabulary's id dtype (uint16 or int32, records.id_dtype)


@dataclasses.dataclass(frozen=True)
class StoredFeature:
  """One bytes feature of a stored example: little-endian `dtype` values, `length` of them."""
  name: str
  dtype: str          # a NumPy dtype name, or IDS
  length_field: str   # the setting that gives the length
  meaning: str        # what the bytes hold, for errors ("seq_len ids")
  extra: int = 0      # values beyond that length

  def stored_dtype(self, ids_dtype: str) -> str:
    return ids_dtype if self.dtype == IDS else self.dtype

  def length(self, settings: Mapping) -> int:
    return settings[self.length_field] + self.extra

  def byte_length(self, settings: Mapping, ids_dtype: str) -> int:
    return self.length(settings) * np.dtype(self.stored_dtype(ids_dtype)).itemsize


# What every A/B example stores (the A/B label besides, as an int64 feature).
PAIR_FEATURES = (StoredFeature("input_ids", IDS, "seq_len", "seq_len ids"),
                 StoredFeature("segment_ids", "uint8", "seq_len", "seq_len segment ids"),
                 StoredFeature("target_positions", "int16", "num_predict",
                               "num_predict positions"))


@dataclasses.dataclass(frozen=True)
class Objective(abc.ABC):
  """The facts of one objective; subclasses add how its examples are drawn and read.

  Attributes:
    name: the flag value, stored in record_info.json and saved heads.
    display_name: in the run's report ("Held-out permutation-LM loss").
    attn_type: the backbone's attention in runs of it ("bi" / "uni").
    backbone_attn_types: the backbones its head can run on.
    stream: the stream whose last layer predicts (QUERY_STREAM or CONTENT_STREAM).
    predicts_next_token: it can generate (`generation.generate`).
    consecutive_segments: its data are consecutive segments of the rows, every position a
      target (reuse_len 0, no bi_data, no A/B pairs); otherwise `A <sep> B <sep> <cls>`
      examples with a target selection and the A/B label.
    needs_mask_id: its data need a <mask> symbol.
    stored_features: the bytes features of a stored example (the record schema).
    recipe_layout: flag defaults it changes in `recipes.recipe_for`.
  """
  name: str
  display_name: str
  attn_type: str
  backbone_attn_types: Tuple[str, ...]
  stream: str
  predicts_next_token: bool
  consecutive_segments: bool
  stored_features: Tuple[StoredFeature, ...]
  needs_mask_id: bool = False
  recipe_layout: Mapping = dataclasses.field(default_factory=dict)

  @property
  def has_pairs(self) -> bool:
    """Its examples are A/B pairs with a label (what next_sentence learns)."""
    return not self.consecutive_segments

  def check_settings(self, settings) -> None:
    """Raises UserInputError if the data stage's settings do not fit the objective's layout
    (beyond the A/B layout's rules, which PretrainingDataConfig checks)."""
    del settings  # perm and mlm add no rule

  def check_backbone(self, attn_type: str) -> None:
    """Raises UserInputError unless the head can predict from a backbone of this attn_type."""
    if attn_type not in self.backbone_attn_types:
      raise UserInputError(
          f"objective {self.name!r} needs a backbone with attn_type "
          f"{' or '.join(repr(kind) for kind in self.backbone_attn_types)}; got attn_type "
          f"{attn_type!r}")

  def stored_extras(self, builder, tokens, selected, functional,
                    targets) -> Tuple[Tuple[StoredFeature, np.ndarray], ...]:
    """The objective's own stored features of one A/B example, drawn with `builder.rng`.

    tokens int32 [T]; selected, functional bool [T]; targets: the target positions."""
    return ()

  @abc.abstractmethod
  def model_inputs(self, columns: Dict, settings: Mapping) -> Dict:
    """TF, batched: the model's inputs from the decoded stored features (int32 [B, length]
    each, `label` int32 [B] for A/B examples)."""


@dataclasses.dataclass(frozen=True)
class _PairObjective(Objective):
  """An objective of A <sep> B <sep> <cls> examples."""

  def model_inputs(self, columns, settings):
    features = self._expand(columns, settings)
    features.update(segment_ids=columns["segment_ids"], label=columns["label"])
    return features

  @abc.abstractmethod
  def _expand(self, columns, settings) -> Dict:
    """The objective's inputs from the stored ids, target positions and its own features."""


_RANKS = StoredFeature("ranks", "int16", "seq_len", "seq_len ranks")
_REPLACEMENTS = StoredFeature("replacements", IDS, "num_predict", "num_predict replacements")


@dataclasses.dataclass(frozen=True)
class PermutationLM(_PairObjective):
  """perm: a factorization order per part (reuse, new); the query stream predicts."""

  def stored_extras(self, builder, tokens, selected, functional, targets):
    reuse_len, perm_size = builder.settings.reuse_len, builder.settings.perm_size
    ranks = np.concatenate([
        permutation.factorization_ranks(builder.rng, selected[:reuse_len],
                                        functional[:reuse_len], perm_size)
        if reuse_len else np.zeros([0], np.int32),
        permutation.factorization_ranks(builder.rng, selected[reuse_len:],
                                        functional[reuse_len:], perm_size)])
    return ((_RANKS, ranks.astype(np.int16)),)

  def _expand(self, columns, settings):
    features = permutation.expand_factorization(columns["input_ids"], columns["ranks"],
                                                columns["target_positions"],
                                                settings["reuse_len"])
    features["input_ids"] = columns["input_ids"]
    return features


@dataclasses.dataclass(frozen=True)
class MaskedLM(_PairObjective):
  """mlm: the id each target shows (80/10/10); the content stream at the target predicts."""

  def stored_extras(self, builder, tokens, selected, functional, targets):
    replacements = np.zeros(builder.settings.num_predict, np.int32)
    replacements[:len(targets)] = masked_lm.draw_replacements(
        builder.rng, tokens[targets], builder.mask_id, builder.ordinary_ids)
    return ((_REPLACEMENTS, replacements),)

  def _expand(self, columns, settings):
    return masked_lm.expand_masked_lm(columns["input_ids"], columns["target_positions"],
                                      columns["replacements"])


@dataclasses.dataclass(frozen=True)
class LeftToRightLM(Objective):
  """clm: consecutive segments (memory = the previous segment); every position predicts."""

  def check_settings(self, settings) -> None:
    require(settings.reuse_len == 0, "PretrainingDataConfig.reuse_len",
            f"0 for objective {self.name} (it reads consecutive segments: the whole segment "
            "becomes memory)", settings.reuse_len)
    require(not settings.bi_data, "PretrainingDataConfig.bi_data",
            f"False for objective {self.name} (it reads left to right)", settings.bi_data)

  def model_inputs(self, columns, settings):
    input_ids, target = lm_streams.split_lm_segment(columns["input_ids"])
    return {"input_ids": input_ids, "target": target,
            "target_mask": tf.ones(input_ids.shape, tf.float32)}  # every target is real


PERMUTATION_LM = PermutationLM(
    name="perm", display_name="permutation-LM", attn_type="bi",
    backbone_attn_types=("bi", "uni"), stream=QUERY_STREAM, predicts_next_token=True,
    consecutive_segments=False, stored_features=PAIR_FEATURES + (_RANKS,))
MASKED_LM = MaskedLM(
    name="mlm", display_name="masked-LM", attn_type="bi", backbone_attn_types=("bi", "uni"),
    stream=CONTENT_STREAM, predicts_next_token=False, consecutive_segments=False,
    stored_features=PAIR_FEATURES + (_REPLACEMENTS,), needs_mask_id=True)
LEFT_TO_RIGHT_LM = LeftToRightLM(
    name="clm", display_name="left-to-right LM", attn_type="uni", backbone_attn_types=("uni",),
    stream=CONTENT_STREAM, predicts_next_token=True, consecutive_segments=True,
    stored_features=(StoredFeature("input_ids", IDS, "seq_len", "seq_len + 1 ids", extra=1),),
    # Transformer-XL's layout: segments of 32 tokens with a memory of 128 (4 segments).
    # Measured (docs/language_modelling.md): trained with a memory as long as the segment, the
    # model used no context beyond it.
    recipe_layout={"seq_len": 32, "reuse_len": 0, "mem_len": 128, "bi_data": False})

# XLNet's own: the default of the flags and settings, and what data from before the objectives
# hold (their record_info.json names none).
DEFAULT = PERMUTATION_LM

OBJECTIVES: Dict[str, Objective] = {objective.name: objective for objective in
                                    (PERMUTATION_LM, MASKED_LM, LEFT_TO_RIGHT_LM)}
NAMES = tuple(OBJECTIVES)  # for flag definitions


LOSS_POSITIONS = ("full", "half")


def check_loss_positions(loss_positions: str, objective: Objective) -> None:
  """UserInputError naming --loss_positions unless it is "full", or "half" for clm."""
  require(loss_positions in LOSS_POSITIONS, "--loss_positions", f"one of {LOSS_POSITIONS}",
          repr(loss_positions))
  require(loss_positions == "full" or objective.consecutive_segments, "--loss_positions",
          f"'full' for objective {objective.name} ('half' is for the left-to-right LM, clm)",
          repr(loss_positions))


def recent_half_targets(batch: Dict) -> Dict:
  """A clm batch whose loss counts only each segment's recent half: target_mask [B, T] zero
  on positions 0..T/2-1 (Transformer-XL's "half" loss)."""
  length = batch["target_mask"].shape[1]
  recent = tf.cast(tf.range(length) >= length // 2, batch["target_mask"].dtype)
  return dict(batch, target_mask=batch["target_mask"] * recent[None])


def named(name: str, argument: str = "objective") -> Objective:
  """The objective called `name`; UserInputError naming `argument` and the valid names."""
  objective: Optional[Objective] = OBJECTIVES.get(name) if isinstance(name, str) else None
  if objective is None:
    raise UserInputError(f"{argument} must be one of {', '.join(map(repr, OBJECTIVES))}; got "
                         f"{name!r}")
  return objective
