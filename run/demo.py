"""A short forward/backward run of a tiny XLNet on a synthetic permutation-LM task.

Each row is an arithmetic sequence of token ids; a random factorization order hides the last
`num_predict` positions of the order, and the query stream must predict them from the rest.
The run prints the model size, the loss at step 0 and at the end, and the time taken.
"""

import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import keras

from xlnet_tf import XLNetConfig, XLNetModel

flags.DEFINE_integer("steps", 300, "Training steps.")
flags.DEFINE_integer("batch_size", 8, "Batch size.")
flags.DEFINE_integer("seq_len", 16, "Sequence length.")
flags.DEFINE_integer("num_predict", 4, "Predicted positions per row.")
flags.DEFINE_integer("seed", 0, "Random seed.")
FLAGS = flags.FLAGS


def synthetic_batch(rng, config, batch_size, seq_len, num_predict):
  starts = rng.integers(0, config.n_token, size=[batch_size, 1])
  strides = rng.integers(1, 4, size=[batch_size, 1])
  input_ids = ((starts + strides * np.arange(seq_len)) % config.n_token).astype(np.int32)
  perm_mask = np.zeros([batch_size, seq_len, seq_len], np.float32)
  target_mapping = np.zeros([batch_size, num_predict, seq_len], np.float32)
  for row in range(batch_size):
    order = rng.permutation(seq_len)
    targets = order[-num_predict:]
    rank = np.argsort(order)
    is_target = np.zeros(seq_len, bool)
    is_target[targets] = True
    # A target is hidden from non-targets and from targets not earlier in the order.
    hidden = is_target[None, :] & (~is_target[:, None] | (rank[None, :] >= rank[:, None]))
    perm_mask[row] = hidden
    target_mapping[row, np.arange(num_predict), targets] = 1.0
  return {"input_ids": input_ids, "segment_ids": np.zeros_like(input_ids),
          "input_mask": np.ones([batch_size, seq_len], np.float32), "perm_mask": perm_mask,
          "target_mapping": target_mapping}


def main(argv):
  del argv
  rng = np.random.default_rng(FLAGS.seed)
  keras.utils.set_random_seed(FLAGS.seed)
  config = XLNetConfig.preset("tiny", n_token=64, dropout=0.0, dropatt=0.0)
  model = XLNetModel(config)
  optimizer = keras.optimizers.Adam(3e-3)

  @tf.function(jit_compile=True)
  def train_step(batch):
    with tf.GradientTape() as tape:
      query_output = model(batch, training=True)["query_output"]  # [B, P, D]
      logits = tf.einsum("bpd,nd->bpn", query_output, model.word_embedding)
      positions = tf.argmax(batch["target_mapping"], axis=-1, output_type=tf.int32)
      targets = tf.gather(batch["input_ids"], positions, batch_dims=1)
      loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
          targets, logits, from_logits=True))
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss

  evaluation = synthetic_batch(rng, config, 64, FLAGS.seq_len, FLAGS.num_predict)

  def evaluate():
    query_output = model(evaluation)["query_output"]
    logits = tf.einsum("bpd,nd->bpn", query_output, model.word_embedding)
    positions = np.argmax(evaluation["target_mapping"], -1)
    targets = np.take_along_axis(evaluation["input_ids"], positions, 1)
    return float(tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
        targets, logits, from_logits=True)))

  parameters = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
  print(f"Tiny XLNet: {config.n_layer} layers, d_model {config.d_model}, {parameters:,} "
        f"parameters; two-stream permutation LM on arithmetic sequences "
        f"(seq_len {FLAGS.seq_len}, {FLAGS.num_predict} predictions per row).")
  initial = evaluate()
  start = time.time()
  for step in range(FLAGS.steps):
    batch = synthetic_batch(rng, config, FLAGS.batch_size, FLAGS.seq_len, FLAGS.num_predict)
    loss = train_step(batch)
    if step % 50 == 0 or step == FLAGS.steps - 1:
      print(f"  step {step:4d}  train loss {float(loss):.3f}")
  elapsed = time.time() - start
  final = evaluate()
  print(f"Held-out loss: step 0 {initial:.3f} -> step {FLAGS.steps} {final:.3f} "
        f"(uniform guess {np.log(config.n_token):.3f}); {FLAGS.steps} XLA train steps in "
        f"{elapsed:.1f}s.")


if __name__ == "__main__":
  app.run(main)
