"""One pretraining configuration (`Recipe`: the model, the data, the optimisation, the budget)
and its named presets: the embedded main job's, and the one for pretraining on your own raw
text on a small machine (chosen by the transfer study in docs/learning.md).

`run/pretrain.py` starts from a preset and replaces what its flags give; the transfer study
holds one recipe and replaces a variant's settings. The loop's options are made from a recipe
in one place (`Recipe.loop_options`).
"""

import dataclasses
from typing import Optional

from xlnet_tf import objectives
from xlnet_tf.pretraining.loop import PretrainingOptions
from xlnet_tf.pretraining.data.settings import PretrainingSettings


@dataclasses.dataclass(frozen=True)
class Recipe:
  """What one pretraining run chooses. The data stage's settings (sequence layout, targets,
  objective, batch rows) are `data`, written to record_info.json with the data."""
  # The model.
  model_size: str = "demo"   # 4 layers, d_model 128 (config.SIZE_PRESETS)
  mem_len: Optional[int] = None  # None: the data's reuse_len
  # Transformer-XL's Table 5 ablation (clm only; XLNetConfig.pos_encoding): the encoding, and
  # the largest distance or position its learned table holds.
  pos_encoding: str = "relative"
  clamp_len: int = -1
  # The data. num_predict 21 of 128 tokens is 16%: K = 6 for perm, BERT's 15% for mlm.
  vocab_size: int = 2000
  data: PretrainingSettings = dataclasses.field(default_factory=PretrainingSettings)
  held_out_every: int = 10   # every n-th document is held out
  # The optimisation.
  learning_rate: float = 2e-3
  warmup_steps: int = 100
  weight_decay: float = 0.01
  lr_layer_decay_rate: float = 1.0
  clip_norm: float = 1.0
  next_sentence: bool = False
  loss_positions: str = "full"   # clm: "half" trains on each segment's recent half only
  # The budget (a time budget, when given, fits the steps to the measured speed).
  train_steps: int = 600

  def replace(self, **values) -> "Recipe":
    """A copy with `values` replaced; names of the data stage's settings go to `data`. When
    the sequence layout changes and perm_size is not given, perm_size follows reuse_len."""
    data_names = {field.name for field in dataclasses.fields(PretrainingSettings)}
    data_values = {name: values.pop(name) for name in list(values) if name in data_names}
    data = self.data
    if data_values:
      if "perm_size" not in data_values and {"seq_len", "reuse_len"} & set(data_values):
        data_values["perm_size"] = None
      data = dataclasses.replace(self.data, **data_values)
    return dataclasses.replace(self, data=data, **values)

  def model_overrides(self) -> dict:
    """The XLNetConfig fields the recipe sets beside the size and the data's layout."""
    return {"pos_encoding": self.pos_encoding, "clamp_len": self.clamp_len}

  def loop_options(self, **run) -> PretrainingOptions:
    """The loop's options: this recipe's optimisation and budget, and `run`'s paths and
    operational choices (model_dir, train_data, save_steps, jit_compile, ...)."""
    return PretrainingOptions(
        train_steps=self.train_steps, learning_rate=self.learning_rate,
        warmup_steps=self.warmup_steps, weight_decay=self.weight_decay,
        lr_layer_decay_rate=self.lr_layer_decay_rate, clip_norm=self.clip_norm,
        next_sentence=self.next_sentence, objective=self.data.objective,
        loss_positions=self.loss_positions, **run)


# The main job: the Python documentation (~0.5 M tokens), 600 steps, about three minutes.
MAIN_JOB = Recipe()
# --input_glob: a domain's text of 1-2 M words within --max_minutes (10-15 on 2 CPU cores).
FROM_TEXT = MAIN_JOB.replace(vocab_size=8000, learning_rate=1e-3, warmup_steps=200,
                             held_out_every=20)


def recipe_for(objective: str, from_text: bool) -> Recipe:
  """The preset of a run: the main job's or FROM_TEXT, for `objective` in its layout (clm:
  Transformer-XL's, `objectives.LEFT_TO_RIGHT_LM.recipe_layout`)."""
  layout = objectives.named(objective).recipe_layout
  return (FROM_TEXT if from_text else MAIN_JOB).replace(objective=objective, **layout)
