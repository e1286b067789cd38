"""One pretraining configuration (`PretrainingRecipeOptions`: the model, the data, the loop's
options, and where run/pretrain.py reads and writes) and its named presets: the embedded main
job's, and the one for pretraining on your own raw text on a small machine (chosen by the
transfer study in docs/learning.md).

The recipe is the whole tree of a pretraining run's settings (training.run_config): run/pretrain.py
builds it from a preset or a --config_file and its flags, writes it to MODEL_DIR/RUN_CONFIG_FILE
(`recorded`) and compares a resumed run's with the recorded one (`resume_differences`); the
transfer study holds one recipe and replaces a variant's settings (`replace`). The backbone it
pretrains is `model_config`; a run's loop options are the recipe's `training` with the run's
paths: dataclasses.replace(recipe.training, model_dir=..., ...).
"""

import contextlib
import dataclasses
import os
from typing import Any, Iterator, List, Mapping, Optional

from xlnet_tf import objectives
from xlnet_tf.config import XLNetConfig
from xlnet_tf.pretraining.loop import PretrainingOptions
from xlnet_tf.pretraining.model_config import config_for_data
from xlnet_tf.pretraining.data.settings import (PretrainingDataConfig, default_num_predict,
                                                default_reuse_len)
from xlnet_tf.training import resume
from xlnet_tf.training import run_config
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError

# The training steps of a run whose time budget (max_minutes) decides how many it takes.
UNTIL_THE_BUDGET = 10 ** 9


@dataclasses.dataclass(frozen=True)
class PretrainingRecipeOptions:
  """What one pretraining run chooses. The data stage's settings (sequence layout, targets,
  objective, batch rows) are `data`, stored in record_info.json with the data; the loop's
  options (optimisation, budget, losses, runtime, its paths) are `training`. `replace` takes
  each setting by its own name (`NAMES`; objective is the data's) or its dotted path."""
  # The model: a size preset, or an xlnet_config.json giving the architecture instead.
  model_size: str = "demo"   # 4 layers, d_model 128 (config.SIZE_PRESETS)
  model_config_file: Optional[str] = None
  mem_len: Optional[int] = None  # None: the data's reuse_len
  # Transformer-XL's Table 5 ablation (clm only; XLNetConfig.pos_encoding): the encoding, and
  # the largest distance or position its learned table holds. None: the model's (relative and
  # no clamping, or what model_config_file says).
  pos_encoding: Optional[str] = None
  clamp_len: Optional[int] = None
  # The data. num_predict 21 of 128 tokens is 16%: K = 6 for perm, BERT's 15% for mlm.
  vocab_size: int = 2000
  data: PretrainingDataConfig = dataclasses.field(default_factory=PretrainingDataConfig)
  held_out_every: int = 10   # every n-th document is held out
  # The loop's options; a recipe leaves their paths None. The budget: train_steps (a time
  # budget, when given, fits the steps to the measured speed).
  training: PretrainingOptions = dataclasses.field(default_factory=lambda: PretrainingOptions(
      train_steps=600, learning_rate=2e-3, warmup_steps=100))
  # run/pretrain.py: the raw text files the data are made from (None: the embedded Python
  # documentation, or training.train_data when given), the directory of data/ and model/
  # (None: pretrain_output[_OBJECTIVE]), and the wall-time budget of the whole command in
  # minutes, data included (training.max_seconds is what it leaves for training).
  input_glob: Optional[str] = None
  output_dir: Optional[str] = None
  max_minutes: Optional[float] = None

  def replace(self, **values) -> "PretrainingRecipeOptions":
    """A copy with `values` replaced, each named by its setting's own name (`NAMES`) or its
    dotted path (**{"training.eval_every": 500}); see `set_fields`. An unknown name is a
    TypeError."""
    unknown = [name for name in values if name not in NAMES and name not in _PATHS]
    if unknown:
      raise TypeError(f"PretrainingRecipeOptions has no setting {unknown[0]!r}")
    return self.set_fields({NAMES.get(name, name): value for name, value in values.items()})

  def set_fields(self, values: Mapping[str, Any],
                 names: Optional[Mapping[str, str]] = None) -> "PretrainingRecipeOptions":
    """A copy with `values` ({dotted path: value}) set (run_config.replace; `names`: the
    fields' names in messages, such as their flags). When the sequence layout changes, what is
    not given follows it, so that a new seq_len alone is a valid layout: reuse_len becomes half
    of seq_len (a layout without memory, reuse_len 0 as clm's, keeps 0; an odd seq_len is
    refused), num_predict the same share of the sequence (settings.default_num_predict; clm
    predicts every token and has none) and perm_size reuse_len."""
    values, names = dict(values), dict(names or {})
    if {"data.seq_len", "data.reuse_len"} & set(values):
      seq_len = values.get("data.seq_len", self.data.seq_len)
      if "data.reuse_len" not in values and self.data.reuse_len:
        if seq_len % 2:
          reuse = names.get("data.reuse_len", "reuse_len")
          raise UserInputError(f"{names.get('data.seq_len', 'seq_len')}={seq_len}: without "
                               f"{reuse}, half of it is reused as memory, so it must be even "
                               f"(or give {reuse})")
        values["data.reuse_len"] = default_reuse_len(seq_len)
      reuse_len = values.get("data.reuse_len", self.data.reuse_len)
      if objectives.named(values.get("data.objective", self.data.objective)).has_pairs:
        values.setdefault("data.num_predict", default_num_predict(seq_len, reuse_len))
      values.setdefault("data.perm_size", None)
    return run_config.replace(self, values, names)

  def model_config(self, settings: Mapping[str, Any], n_token: int, **overrides) -> XLNetConfig:
    """The backbone this recipe pretrains on records made with `settings` (record_info.json's
    "settings", or data.to_dict()) of vocabulary `n_token`: model_config_file's architecture or
    model_size's, mem_len, and pos_encoding and clamp_len where set
    (model_config.config_for_data); `overrides`: more config fields (dropout, ...)."""
    encoding = {name: value for name, value in (("pos_encoding", self.pos_encoding),
                                                ("clamp_len", self.clamp_len))
                if value is not None}
    return config_for_data(settings, n_token, model_size=self.model_size,
                           model_config_file=self.model_config_file, mem_len=self.mem_len,
                           **encoding, **overrides)


_PATHS = frozenset(run_config.field_paths(PretrainingRecipeOptions))
# A setting's own name -> its dotted path, for `replace`: each name is one field's, and
# objective, which the loop's options also hold (a check against the data's), is the data's.
NAMES = run_config.names_to_paths(PretrainingRecipeOptions,
                                  chosen={"objective": "data.objective"})

# What a resumed run may change (`resume_differences`): how long it runs, how often it saves,
# logs and evaluates, how it computes the same update (XLA, recomputation, micro-batches, the
# devices), and its paths (the data they lead to are compared as data.*, the text made into
# them by its sizes, the model by its config: checkpoint_model.json).
RESUMABLE = frozenset([
    "max_minutes", "training.train_steps", "training.max_seconds", "training.save_steps",
    "training.keep_checkpoints", "training.log_steps", "training.eval_batches",
    "training.eval_every", "training.summaries", "training.jit_compile",
    "training.recompute_blocks", "training.gradient_accumulation_steps",
    "training.runtime.strategy", "training.runtime.tpu", "training.runtime.cpu_replicas",
    "input_glob", "output_dir", "model_config_file", "training.model_dir",
    "training.train_data", "training.valid_data", "training.init_checkpoint",
    "training.init_checkpoint_format"])


@contextlib.contextmanager
def recorded(model_dir: str, recipe: PretrainingRecipeOptions, chief: bool = True) -> Iterator:
  """Within the block, `recipe` (the run's whole tree) is recorded in model_dir/RUN_CONFIG_FILE,
  written whole by the chief; --config_file=that path (with its paths as flags) repeats the
  run. A block that fails before model_dir holds a checkpoint removes the record again: what
  it describes was not made (and a model directory the run created is left empty)."""
  path = os.path.join(model_dir, run_config.RUN_CONFIG_FILE)
  if chief:
    run_config.write(model_dir, recipe)
  try:
    yield path
  except BaseException:
    if chief and not files.exists(os.path.join(model_dir, resume.STATE_FILE)):
      with contextlib.suppress(OSError):
        files.remove(path)
    raise


def resume_differences(model_dir: str, recipe: PretrainingRecipeOptions) -> List[str]:
  """The dotted names of the settings in which `recipe` differs from the run recorded in
  model_dir (`recorded`), other than RESUMABLE ones; [] when model_dir holds no checkpoint to
  resume or no record (a run made before records were written)."""
  path = os.path.join(model_dir, run_config.RUN_CONFIG_FILE)
  if not (files.exists(os.path.join(model_dir, resume.STATE_FILE)) and files.exists(path)):
    return []
  record = run_config.read(path, PretrainingRecipeOptions)
  return [name for name in run_config.differences(record, recipe) if name not in RESUMABLE]


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
