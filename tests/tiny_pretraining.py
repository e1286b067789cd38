"""The tiny pretraining run the loop's tests share: its config, a one-device run, and the
subprocess runner of tests/pretraining/distributed_run.py."""

import json
import os

import keras
import tensorflow as tf

from forked_tools import run_forked
from xlnet_tf import XLNetConfig
from xlnet_tf.pretraining.loop import PretrainingOptions, PretrainingRun
from xlnet_tf.pretraining.data.records import load_record_info

RUNNER = os.path.join(os.path.dirname(__file__), "pretraining", "distributed_run.py")


def config_for(data, **overrides):
  info = load_record_info(data)
  values = dict(n_token=info["tokenizer"]["vocab_size"], n_layer=2, d_model=32, n_head=4,
                d_head=8, d_inner=64, dropout=0.0, dropatt=0.0, mem_len=16, reuse_len=16,
                bi_data=info["settings"]["bi_data"])
  values.update(overrides)
  return XLNetConfig(**values)


def make_run(data, model_dir, steps, seed=0, model=None, **option_overrides):
  """A one-device run of the tiny model (`model`: config overrides) on `data`."""
  keras.utils.set_random_seed(seed)
  options = dict(model_dir=str(model_dir), train_data=data, train_steps=steps,
                 learning_rate=1e-2, warmup_steps=2, log_steps=1, save_steps=3, summaries=False)
  options.update(option_overrides)
  return PretrainingRun(tf.distribute.OneDeviceStrategy("/cpu:0"),
                        config_for(data, **(model or {})), PretrainingOptions(**options))


def run_distributed_printed(args, env=None):
  """distributed_run.py with `args`; {"LOSSES": per-step losses, "EVALUATION": ...}: the JSON
  lines it printed, by their first word."""
  result = run_forked([RUNNER] + [str(a) for a in args], env=env,
                          timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  printed = {}
  for line in result.stdout.splitlines():
    word, _, rest = line.partition(" ")
    if word in ("LOSSES", "EVALUATION"):
      printed[word] = json.loads(rest)
  return printed


def run_distributed(args, env=None):
  """distributed_run.py with `args`; returns the per-step losses it prints."""
  return run_distributed_printed(args, env)["LOSSES"]

