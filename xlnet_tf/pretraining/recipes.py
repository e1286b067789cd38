"""The defaults of `run/pretrain.py`: the embedded main job's, and the recipe for pretraining on
your own raw text on a small machine (chosen by the transfer study in docs/learning.md).

Every value is a flag default; a flag given on the command line wins.
"""

import dataclasses
from typing import Optional

from xlnet_tf.pretraining import objectives


@dataclasses.dataclass(frozen=True)
class Recipe:
  model_size: str = "demo"   # 4 layers, d_model 128 (config.SIZE_PRESETS)
  vocab_size: int = 2000
  seq_len: int = 128
  reuse_len: int = 64
  num_predict: int = 21      # 16% of the tokens: K = 6 for perm, BERT's 15% for mlm
  bsz_per_host: int = 16
  learning_rate: float = 2e-3
  warmup_steps: int = 100
  next_sentence: bool = False
  bi_data: bool = True       # forward and backward rows
  mem_len: Optional[int] = None  # None: reuse_len
  held_out_every: int = 10   # every n-th document is held out


# The main job: the Python documentation (~0.5 M tokens), 600 steps, about three minutes.
MAIN_JOB = Recipe()
# --input_glob: a domain's text of 1-2 M words within --max_minutes (10-15 on 2 CPU cores).
FROM_TEXT = Recipe(vocab_size=8000, learning_rate=1e-3, warmup_steps=200, held_out_every=20)


def recipe_for(objective: str, from_text: bool) -> Recipe:
  """The defaults of a run: the main job's or FROM_TEXT, in the objective's layout (clm:
  Transformer-XL's, `objectives.LEFT_TO_RIGHT_LM.recipe_layout`)."""
  recipe = FROM_TEXT if from_text else MAIN_JOB
  return dataclasses.replace(recipe, **objectives.named(objective).recipe_layout)
