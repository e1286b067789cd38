"""Pretraining with --gradient_accumulation_steps: K micro-batches (each with its rows' memory,
forward and backward halves kept together with bi_data) make the update, the loss and the new
memory of one step on the whole batch (float32, dropout off). Micro-batches over mirrored
replicas: test_loop_distributed.py, beside the one-device run it compares with."""

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf.pretraining.loop import PretrainingOptions, PretrainingRun
from xlnet_tf.pretraining.data.records import load_record_info
from xlnet_tf import XLNetConfig


def _steps(data, model_dir, accumulation, steps=3):
  """(loss, gradient norm) per step, the final memory and weights of a one-device run."""
  keras.utils.set_random_seed(0)
  info = load_record_info(data)
  config = XLNetConfig(n_token=info["tokenizer"]["vocab_size"], n_layer=2, d_model=32, n_head=4,
                       d_head=8, d_inner=64, dropout=0.0, dropatt=0.0, mem_len=16,
                       reuse_len=16, bi_data=info["settings"]["bi_data"])
  run = PretrainingRun(tf.distribute.OneDeviceStrategy("/cpu:0"), config, PretrainingOptions(
      model_dir=str(model_dir), train_data=data, train_steps=steps, learning_rate=1e-2,
      summaries=False, gradient_accumulation_steps=accumulation))
  batches, mems, losses = run._distributed_data(data), run.memory.zeros(), []
  for _ in range(steps):
    loss, norm, mems = run.steps.train_step(batches, mems)
    losses.append((float(loss), float(norm)))
  return losses, [m.numpy() for m in mems], [w.numpy() for w in run.model.weights]


def test_micro_batches_with_memory_equal_the_whole_batch(small_data, tmp_path):
  """bi_data records, 4 rows a batch: 2 micro-batches of one forward and one backward row."""
  whole = _steps(small_data["bi"], tmp_path / "whole", 1)
  micro = _steps(small_data["bi"], tmp_path / "micro", 2)
  np.testing.assert_allclose(micro[0], whole[0], rtol=1e-6)
  assert np.abs(whole[1][0]).max() > 0  # the memory is there, and carried
  for got, want in zip(micro[1] + micro[2], whole[1] + whole[2]):
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)


