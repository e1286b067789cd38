"""Runs a few pretraining steps in a fresh process and prints the losses as JSON.

Used by the distribution tests: logical CPU devices must be set before TensorFlow starts.
  python distributed_run.py STRATEGY CPU_REPLICAS DATA MODEL_DIR STEPS
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main():
  strategy_name, cpu_replicas, data, model_dir, steps = sys.argv[1:6]
  import keras
  from xlnet_tf import XLNetConfig
  from xlnet_tf.pretraining.records import load_record_info
  from xlnet_tf.training import strategy as strategy_lib
  from xlnet_tf.pretraining.loop import PretrainingOptions, PretrainingRun
  if int(cpu_replicas):
    strategy_lib.split_cpu(int(cpu_replicas))
  keras.utils.set_random_seed(0)
  strategy = strategy_lib.create_strategy(strategy_name)
  info = load_record_info(data)
  config = XLNetConfig(n_token=info["tokenizer"]["vocab_size"], n_layer=2, d_model=32, n_head=4,
                       d_head=8, d_inner=64, dropout=0.0, dropatt=0.0, mem_len=16,
                       reuse_len=16, bi_data=info["settings"]["bi_data"])
  options = PretrainingOptions(model_dir=model_dir, train_data=data, train_steps=int(steps),
                               learning_rate=1e-2, warmup_steps=0, log_steps=1,
                               save_steps=1000, summaries=False)
  result = PretrainingRun(strategy, config, options).train()
  print("LOSSES " + json.dumps([record["loss"] for record in result["history"]]))


if __name__ == "__main__":
  main()
