"""One study pretraining run, resumable, with its backbone kept at snapshot steps along the
way: what every study's variants are trained with (transfer, context_ablation)."""

import dataclasses
import math
import os
import shutil
import time
from typing import Dict, Sequence

import tensorflow as tf

from xlnet_tf.config import XLNetConfig
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.utils.json_files import read_json, write_json
from xlnet_tf.pretraining import recipes
from xlnet_tf.pretraining.loop import LM_DIR, PRETRAINED_DIR, PretrainingRun


def model_config(recipe: recipes.PretrainingRecipeOptions, n_token: int) -> XLNetConfig:
  """A study backbone: the recipe's size, memory and encoding on its data's layout, no
  dropout (the demo recipe's)."""
  return recipe.model_config(recipe.data.to_dict(), n_token, dropout=0.0, dropatt=0.0)


def pretrain(recipe: recipes.PretrainingRecipeOptions, config, data: Dict[str, str],
             model_dir: str, stops: Sequence[int]) -> Dict:
  """Trains `config` on data["train"] to stops[-1] (= the recipe's train_steps), exporting the
  backbone and its LM head at every stop; each earlier stop is kept under
  model_dir/snapshots/STEP. Returns {"steps", "tokens", "seconds", "held_out" (the curve on
  data["valid"], every recipe.training.eval_every steps), "snapshots": {step: {"backbone",
  "lm"}}}.

  Resumable: the curve and the snapshots kept so far are written beside the run's
  checkpoints (one at every stop, saved before its snapshot is copied)."""
  options = dataclasses.replace(
      recipe.training, model_dir=model_dir, train_data=data["train"], valid_data=data["valid"],
      save_steps=math.gcd(*stops), log_steps=max(recipe.training.train_steps // 10, 1),
      summaries=False)
  started = time.perf_counter()
  run = PretrainingRun(tf.distribute.get_strategy(), config, options)
  progress_path = os.path.join(model_dir, "variant_progress.json")
  progress = (read_json(progress_path) if os.path.exists(progress_path) else
              {"held_out": [dict(run.evaluate(), step=0)], "snapshots": {}})
  for stop in stops:
    if str(stop) in progress["snapshots"]:
      continue
    result = run.train(until=stop)
    if result["step"] != stop:
      raise UserInputError(f"{model_dir}: the run's checkpoint is at step {result['step']}, past "
                           f"the snapshot at {stop}; delete the directory to pretrain again")
    progress["held_out"] += result["held_out"]
    exported = run.export()
    if stop < stops[-1]:
      kept = os.path.join(model_dir, "snapshots", str(stop))
      for directory in (PRETRAINED_DIR, LM_DIR):
        shutil.copytree(exported[directory], os.path.join(kept, directory), dirs_exist_ok=True)
      progress["snapshots"][str(stop)] = {"backbone": os.path.join(kept, PRETRAINED_DIR),
                                          "lm": os.path.join(kept, LM_DIR)}
    write_json(progress_path, progress)
  steps = stops[-1]
  return {"steps": steps, "tokens": steps * run.global_batch * run.seq_len,
          "seconds": time.perf_counter() - started, "held_out": progress["held_out"],
          "snapshots": progress["snapshots"]}
