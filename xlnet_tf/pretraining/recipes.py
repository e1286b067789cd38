"""One pretraining configuration (`PretrainingRecipeOptions`: the model, the data, the loop's
options) and its named presets: the embedded main job's, and the one for pretraining on your own
raw text on a small machine (chosen by the transfer study in docs/learning.md).

`run/pretrain.py` starts from a preset and replaces what its flags give; the transfer study
holds one recipe and replaces a variant's settings. A run's loop options are the recipe's
`training` with the run's paths: dataclasses.replace(recipe.training, model_dir=..., ...).
"""

import dataclasses
from typing import Optional

from xlnet_tf import objectives
from xlnet_tf.pretraining.loop import PretrainingOptions
from xlnet_tf.pretraining.data.settings import (PretrainingDataConfig, default_num_predict,
                                                default_reuse_len)
from xlnet_tf.training.options import accepts_group_fields, group_field


@accepts_group_fields
@dataclasses.dataclass(frozen=True)
class PretrainingRecipeOptions:
  """What one pretraining run chooses. The data stage's settings (sequence layout, targets,
  objective, batch rows) are `data`, stored in record_info.json with the data; the loop's
  options (optimisation, budget, losses) are `training`. The constructor and `replace` take
  the fields of both by name; `objective` is the data's."""
  # The model.
  model_size: str = "demo"   # 4 layers, d_model 128 (config.SIZE_PRESETS)
  mem_len: Optional[int] = None  # None: the data's reuse_len
  # Transformer-XL's Table 5 ablation (clm only; XLNetConfig.pos_encoding): the encoding, and
  # the largest distance or position its learned table holds.
  pos_encoding: str = "relative"
  clamp_len: int = -1
  # The data. num_predict 21 of 128 tokens is 16%: K = 6 for perm, BERT's 15% for mlm.
  vocab_size: int = 2000
  data: PretrainingDataConfig = group_field(PretrainingDataConfig)
  held_out_every: int = 10   # every n-th document is held out
  # The loop's options without the run's paths. The budget: train_steps (a time budget, when
  # given, fits the steps to the measured speed).
  training: PretrainingOptions = group_field(PretrainingOptions, train_steps=600,
                                             learning_rate=2e-3, warmup_steps=100)

  def replace(self, **values) -> "PretrainingRecipeOptions":
    """A copy with `values` replaced. When the sequence layout changes, what is not given
    follows it, so that a new seq_len alone is a valid layout: reuse_len becomes half of
    seq_len (a layout without memory, reuse_len 0 as clm's, keeps 0), num_predict the same
    share of the sequence (settings.default_num_predict; clm predicts every token and has
    none) and perm_size reuse_len."""
    if {"seq_len", "reuse_len"} & set(values):
      seq_len = values.get("seq_len", self.data.seq_len)
      if "reuse_len" not in values and self.data.reuse_len:
        values["reuse_len"] = default_reuse_len(seq_len)
      reuse_len = values.get("reuse_len", self.data.reuse_len)
      if objectives.named(values.get("objective", self.data.objective)).has_pairs:
        values.setdefault("num_predict", default_num_predict(seq_len, reuse_len))
      values.setdefault("perm_size", None)
    return dataclasses.replace(self, **values)

  def model_overrides(self) -> dict:
    """The XLNetConfig fields the recipe sets beside the size and the data's layout."""
    return {"pos_encoding": self.pos_encoding, "clamp_len": self.clamp_len}


# The main job: the Python documentation (~0.5 M tokens), 600 steps, about three minutes.
MAIN_JOB = PretrainingRecipeOptions()
# --input_glob: a domain's text of 1-2 M words within --max_minutes (10-15 on 2 CPU cores).
FROM_TEXT = MAIN_JOB.replace(vocab_size=8000, learning_rate=1e-3, warmup_steps=200,
                             held_out_every=20)


def recipe_for(objective: str, from_text: bool) -> PretrainingRecipeOptions:
  """The preset of a run: the main job's or FROM_TEXT, for `objective` in its layout (clm:
  Transformer-XL's, `objectives.LEFT_TO_RIGHT_LM.recipe_layout`)."""
  layout = objectives.named(objective).recipe_layout
  return (FROM_TEXT if from_text else MAIN_JOB).replace(objective=objective, **layout)
