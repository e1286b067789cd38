"""The backbone config that pretrains on a given set of records: one rule for every caller
(run/pretrain.py, the transfer study).

The data decide the run-time options: the memory a row carries (reuse_len, and mem_len by
default the same), whether the batch holds forward and backward rows (bi_data), and the
attention the objective needs (clm reads left to right). The architecture comes from a config
file or a size preset.
"""

from typing import Any, Mapping, Optional

from xlnet_tf.config import XLNetConfig
from xlnet_tf import objectives


def config_for_data(settings: Mapping[str, Any], n_token: int, model_size: Optional[str] = None,
                    model_config_file: Optional[str] = None, mem_len: Optional[int] = None,
                    **overrides) -> XLNetConfig:
  """The config of a backbone trained on records made with `settings` (record_info.json's
  "settings", or PretrainingDataConfig.to_dict()).

  Args:
    settings: the data stage's settings: reuse_len, bi_data and objective are read.
    n_token: the vocabulary (the records' tokenizer) when the size comes from `model_size`.
    model_size: a SIZE_PRESETS name ("demo": dropout 0); None: the dataclass defaults, with
      `overrides` naming the architecture.
    model_config_file: an xlnet_config.json giving the architecture (and n_token) instead.
    mem_len: the memory length; default the data's reuse_len.
    **overrides: other config fields (dropout, n_layer, ...), applied last.
  """
  runtime = dict(mem_len=settings["reuse_len"] if mem_len is None else mem_len,
                 reuse_len=settings["reuse_len"], bi_data=settings["bi_data"],
                 attn_type=objectives.named(settings["objective"]).attn_type)
  if model_config_file:
    return XLNetConfig.from_json_file(model_config_file, **runtime, **overrides)
  if model_size == "demo":  # the demo backbone has no dropout (docs/learning.md)
    runtime.update(dropout=0.0, dropatt=0.0)
  values = {"n_token": n_token, **runtime, **overrides}
  return XLNetConfig.preset(model_size, **values) if model_size else XLNetConfig(**values)
