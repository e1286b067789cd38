"""Runs a few pretraining steps in a fresh process and prints the losses as JSON.

Used by the distribution and resume tests: logical CPU devices must be set before TensorFlow
starts.
  python distributed_run.py STRATEGY CPU_REPLICAS DATA MODEL_DIRS STEPS [OPTIONS]

MODEL_DIRS: one directory, or several separated by commas, trained one after the other (from
the same initial weights) in this process. OPTIONS:
  --model=JSON      XLNetConfig values over the tiny config below (e.g. {"dropout": 0.1})
  --options=JSON    PretrainingOptions values over the ones below
  --kill_after=S    the process sends itself SIGKILL right after training step S
(SIGTERM or SIGINT stops a run with its checkpoint, its line on stderr and exit status 143 or
130, as run/pretrain.py; tests/interrupted_tool.py pauses it at a known step for that.)
  --weights         each directory's final weights go to DIR.npz (by variable path)
  --evaluate=N      after training, the held-out loss of N batches of DATA (printed as JSON)
"""

import json
import os
import signal
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _killing_after(step_function, steps):
  """step_function, but the process dies (SIGKILL, as kill -9) after its `steps`-th call."""
  calls = []

  def step(*args):
    result = step_function(*args)
    calls.append(None)
    if len(calls) == steps:
      float(result[0])  # the step has run
      os.kill(os.getpid(), signal.SIGKILL)
    return result
  return step


def main():
  strategy_name, cpu_replicas, data, model_dirs, steps = sys.argv[1:6]
  extra = dict(argument[2:].partition("=")[::2] for argument in sys.argv[6:])
  import keras
  import numpy as np
  from xlnet_tf import XLNetConfig
  from xlnet_tf.pretraining.data.records import load_record_info
  from xlnet_tf.training import strategy as strategy_lib
  from xlnet_tf.pretraining.loop import PretrainingOptions, PretrainingRun
  from xlnet_tf.utils.errors import StoppedBySignal
  if int(cpu_replicas):
    strategy_lib.split_cpu(int(cpu_replicas))
  strategy = strategy_lib.create_strategy(strategy_name)
  info = load_record_info(data)
  config = dict(n_token=info["tokenizer"]["vocab_size"], n_layer=2, d_model=32, n_head=4,
                d_head=8, d_inner=64, dropout=0.0, dropatt=0.0, mem_len=16, reuse_len=16,
                bi_data=info["settings"]["bi_data"])
  config.update(json.loads(extra.get("model", "{}")))
  for model_dir in model_dirs.split(","):
    keras.utils.set_random_seed(0)
    options = dict(model_dir=model_dir, train_data=data, train_steps=int(steps),
                   learning_rate=1e-2, warmup_steps=0, log_steps=1, save_steps=1000,
                   summaries=False)
    options.update(json.loads(extra.get("options", "{}")))
    run = PretrainingRun(strategy, XLNetConfig(**config), PretrainingOptions(**options))
    if "kill_after" in extra:
      run.steps.train_step = _killing_after(run.steps.train_step, int(extra["kill_after"]))
    try:
      result = run.train()
    except StoppedBySignal as stop:  # as the CLIs end (xlnet_tf/utils/cli.py)
      print(stop, file=sys.stderr)
      sys.exit(stop.exit_status)
    if "weights" in extra:
      np.savez(model_dir + ".npz", **{v.path: v.numpy() for v in run.model.weights})
    if "evaluate" in extra:
      evaluation = run.evaluate(data, int(extra["evaluate"]))
      print("EVALUATION " + json.dumps({k: float(v) for k, v in evaluation.items()}))
    print("LOSSES " + json.dumps([record["loss"] for record in result["history"]]))


if __name__ == "__main__":
  main()
