"""How a classification run reads long documents: --max_segments S and --mem_len M.

A document is packed into S * T positions and read as S consecutive segments of T
(--max_seq_length) with Transformer-XL memory of M positions (xlnet_tf.text.packing has the
layout, XLNetClassifier the reading). S = 1, M = 0 is one sequence per text, no memory.

A training run saves S in best/head.json (XLNetClassifier's max_segments) and M in
best/xlnet_config.json (mem_len); a later run without training (--do_eval / --do_predict) and
run/export.py read them back, so they rebuild the model and the split training used.
"""

import dataclasses
import os
from typing import Optional

from xlnet_tf.checkpoints import own
from xlnet_tf.config import XLNetConfig
from xlnet_tf.utils.errors import UserInputError, require
from xlnet_tf.tasks.finetuning import MAX_TENSOR_ELEMENTS


@dataclasses.dataclass(frozen=True)
class LongDocuments:
  """S segments of max_seq_length tokens, read with mem_len positions of memory."""
  max_segments: int = 1
  mem_len: int = 0

  def __post_init__(self):
    check_flags(self.max_segments, self.mem_len)


def check_flags(max_segments: int, mem_len: int) -> None:
  """One-line errors naming the flag: S >= 1, M >= 0, memory exactly when S > 1."""
  require(max_segments >= 1, "--max_segments", "at least 1 (segments of --max_seq_length "
          "tokens per text; 1 = one sequence)", max_segments)
  require(mem_len >= 0, "--mem_len", "at least 0", mem_len)
  require(max_segments == 1 or mem_len > 0, "--mem_len",
          f"at least 1 with --max_segments={max_segments} (the memory carries each segment "
          "into the next; (max_segments - 1) x --max_seq_length reaches all of them)", mem_len)
  require(max_segments > 1 or mem_len == 0, "--mem_len",
          "0 with --max_segments=1 (one segment reads no memory)", mem_len)


def stored(model_dir: str) -> Optional[LongDocuments]:
  """The S and M a training run saved in `model_dir` (its best/), None without a head.json."""
  head_file = own.read_head_file(model_dir)
  if head_file is None:
    return None
  max_segments = head_file[1].get("max_segments", 1)
  mem_len = 0
  if max_segments > 1:
    mem_len = XLNetConfig.from_json_file(os.path.join(model_dir, own.CONFIG_FILE)).mem_len
  return LongDocuments(max_segments, mem_len)


def run_settings(max_segments: Optional[int], mem_len: Optional[int],
                 trained_in: Optional[str] = None) -> LongDocuments:
  """The settings of a run: the flags (None = not given: 1 and 0), or for a run that does not
  train, what the training run saved in `trained_in` (a flag given must agree with it)."""
  given = {"max_segments": max_segments, "mem_len": mem_len}
  saved = stored(trained_in) if trained_in else None
  if saved is None:
    return LongDocuments(1 if max_segments is None else max_segments,
                         0 if mem_len is None else mem_len)
  for name, value in given.items():
    if value is not None and value != getattr(saved, name):
      source = os.path.join(trained_in, own.HEAD_FILE if name == "max_segments" else
                            own.CONFIG_FILE)
      raise UserInputError(
          f"--{name}={value}: the classifier in {trained_in} was trained with {name}="
          f"{getattr(saved, name)} ({source}); leave --{name} out to use it")
  return saved


def check_attention_size(settings: LongDocuments, config, max_seq_length: int,
                         batch_size: int) -> None:
  """Refuses a --mem_len whose attention scores of one segment, [B, N, T, M + T], would hold
  more values than TensorFlow can index (finetuning.check_sequence_length checks M = 0)."""
  scores = batch_size * config.n_head * max_seq_length * (max_seq_length + settings.mem_len)
  if scores > MAX_TENSOR_ELEMENTS:
    raise UserInputError(
        f"--mem_len={settings.mem_len}: the attention scores of a segment (batch {batch_size} x "
        f"n_head {config.n_head} x {max_seq_length} x ({max_seq_length} + {settings.mem_len}) = "
        f"{scores:.3g} values) exceed 2^31 - 1; use a shorter --mem_len or a smaller batch")
