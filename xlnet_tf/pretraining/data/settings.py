"""PretrainingDataConfig: the data stage's settings, stored in record_info.json (under
"settings") and checked by the readers, and their validation (the objective's layout rules from
`objectives`). Messages name a setting PretrainingDataConfig.<field>.
"""

import dataclasses
from typing import Dict, Optional, Tuple

from xlnet_tf.utils.errors import require
from xlnet_tf import objectives

FUNCTIONAL_TOKENS = 3  # <sep> after A, <sep> after B, <cls>
# The predicted share of a sequence: 21 of 128 tokens (16%), near the original's 85 of 512.
PREDICTED_SHARE = 21 / 128


def default_reuse_len(seq_len: int) -> int:
  """The memory part of a sequence when only seq_len is given: half of it, as the original's
  256 of 512 (and the default 64 of 128)."""
  return seq_len // 2


def default_num_predict(seq_len: int, reuse_len: int) -> int:
  """Targets per sequence when not given: PREDICTED_SHARE of seq_len (21 at 128), lowered to
  the most the parts hold (`PretrainingDataConfig.predictions_per_part`), at least 1."""
  count = max(1, round(seq_len * PREDICTED_SHARE))
  new_len = seq_len - reuse_len - FUNCTIONAL_TOKENS
  while count > 1:
    in_reuse, in_new = ((count - count // 2, count // 2) if reuse_len else (0, count))
    if in_reuse <= reuse_len and in_new <= new_len:
      break
    count -= 1
  return count


@dataclasses.dataclass
class PretrainingDataConfig:
  """Settings of the data stage; stored in record_info.json and checked by readers."""
  seq_len: int = 128
  reuse_len: int = 64
  num_predict: int = 21
  perm_size: Optional[int] = None  # default: reuse_len (or seq_len without reuse)
  bsz_per_host: int = 16
  num_core_per_host: int = 1
  bi_data: bool = True
  mask_alpha: int = 6
  mask_beta: int = 1
  max_span_words: int = 5
  uncased: bool = False
  use_eod: bool = True
  objective: str = objectives.DEFAULT.name  # a name of objectives.OBJECTIVES
  span_prediction: bool = True  # False: single-token targets
  # What a word is for spans and whole-word masks (`words`): a piece of a script written
  # without spaces (Chinese, Japanese, Thai) is one, and a longer "word" is predicted as pieces.
  unspaced_pieces_as_words: bool = True
  max_word_pieces: int = 32  # 0: no limit

  def __post_init__(self):
    if self.perm_size is None:
      self.perm_size = self.reuse_len or self.seq_len
    self.validate()

  @property
  def lm_objective(self) -> objectives.Objective:
    return objectives.named(self.objective, "PretrainingDataConfig.objective")

  @property
  def new_len(self) -> int:
    return self.seq_len - self.reuse_len

  @property
  def predictions_per_part(self) -> Tuple[int, int]:
    """(reuse part, new part): the original gives the reuse part the larger half."""
    if self.reuse_len == 0:
      return 0, self.num_predict
    return self.num_predict - self.num_predict // 2, self.num_predict // 2

  def validate(self) -> None:
    for name in ("seq_len", "num_predict", "bsz_per_host", "num_core_per_host", "mask_alpha",
                 "mask_beta", "max_span_words", "perm_size"):
      value = getattr(self, name)
      require(isinstance(value, int) and value > 0, f"PretrainingDataConfig.{name}",
              "a positive integer", repr(value))
    require(isinstance(self.max_word_pieces, int) and self.max_word_pieces >= 0,
            "PretrainingDataConfig.max_word_pieces", "an integer >= 0 (0: no limit)",
            repr(self.max_word_pieces))
    objective = self.lm_objective
    require(self.bsz_per_host % self.num_core_per_host == 0, "PretrainingDataConfig.bsz_per_host",
            f"divisible by num_core_per_host ({self.num_core_per_host})", self.bsz_per_host)
    objective.check_settings(self)
    if objective.has_pairs:
      self._validate_pairs()

  def _validate_pairs(self) -> None:
    """The A <sep> B <sep> <cls> layout: parts, factorization chunks, predictions."""
    require(0 <= self.reuse_len < self.seq_len - FUNCTIONAL_TOKENS,
            "PretrainingDataConfig.reuse_len",
            f"in [0, seq_len - 3) so A and B get a token each (seq_len={self.seq_len})",
            self.reuse_len)
    for part, length in (("reuse", self.reuse_len), ("new", self.new_len)):
      if length:
        require(length % self.perm_size == 0 and self.perm_size <= length,
                "PretrainingDataConfig.perm_size",
                f"a divisor of the {part} part's length {length}", self.perm_size)
    in_reuse, in_new = self.predictions_per_part
    require(in_reuse <= self.reuse_len and in_new <= self.new_len - FUNCTIONAL_TOKENS,
            "PretrainingDataConfig.num_predict",
            f"small enough for the parts: the reuse part (length {self.reuse_len}) gets {in_reuse} "
            f"predictions and the new part (length {self.new_len}, 3 functional tokens) {in_new}",
            self.num_predict)
    require(self.seq_len < 32768, "PretrainingDataConfig.seq_len",
            "< 32768 (ranks are stored as int16)", self.seq_len)
    if self.bi_data:
      require(self.bsz_per_host % (2 * self.num_core_per_host) == 0,
              "PretrainingDataConfig.bsz_per_host", "divisible by 2 * num_core_per_host with "
              "bi_data (each core holds forward and backward halves)", self.bsz_per_host)

  def to_dict(self) -> Dict:
    return dataclasses.asdict(self)

