r"""Linear probes of frozen backbones, layer by layer: what pretraining put into the features.

For each backbone (own-format directories, or `random` for a random init of the first one's
architecture), every layer's content stream is pooled two ways (the mean over real tokens, and
the last position, <cls>) and a softmax regression is trained on the task's training split;
dev accuracy is printed per layer (the embedding layer first).

  python run/probe_features.py --sp_path=DIR/data/spiece.model --task_dir=man/man_section \\
      --backbones=random,DIR/model/pretrained
"""

from absl import app
from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py
import keras
import numpy as np
import tensorflow as tf

from xlnet_tf.modeling.backbone import XLNetModel
from xlnet_tf.studies import transfer
from xlnet_tf.text.tokenizer import XLNetTokenizer

flags.DEFINE_string("sp_path", None, "SentencePiece model of the backbones.")
flags.DEFINE_string("task_dir", None, "Directory with train/dev/test .jsonl (generic format).")
flags.DEFINE_list("backbones", None, "Own-format backbone directories, or 'random'.")
flags.DEFINE_integer("max_seq_length", 64, "Tokens per example.")
flags.DEFINE_integer("probe_steps", 300, "Adam steps of each probe.")
flags.DEFINE_integer("seed", 0, "Seed of the random backbone.")
flags.mark_flags_as_required(["sp_path", "task_dir", "backbones"])
FLAGS = flags.FLAGS


def layer_features(model, features, batch_size=256):
  """[(mean-pooled, last-position) per layer input and the output], float32 NumPy."""
  pooled = None
  for start in range(0, len(features["input_ids"]), batch_size):
    batch = {key: features[key][start:start + batch_size]
             for key in ("input_ids", "segment_ids", "input_mask")}
    # mem_len >= T and reuse_len 0: new_mems holds every layer's whole input.
    outputs = model(batch, training=False)
    layers = [m.numpy() for m in outputs["new_mems"]] + [outputs["sequence_output"].numpy()]
    mask = batch["input_mask"][:, :, None]
    current = [(h * mask).sum(1) / mask.sum(1) for h in layers] + [h[:, -1] for h in layers]
    pooled = current if pooled is None else [np.concatenate([a, b])
                                             for a, b in zip(pooled, current)]
  return pooled


def probe_accuracy(train_x, train_y, test_x, test_y, classes, steps):
  mean, scale = train_x.mean(0), train_x.std(0) + 1e-6
  train_x, test_x = (train_x - mean) / scale, (test_x - mean) / scale
  weights = tf.Variable(tf.zeros([train_x.shape[1], classes]))
  bias = tf.Variable(tf.zeros([classes]))
  optimizer = keras.optimizers.Adam(0.01)
  for _ in range(steps):
    with tf.GradientTape() as tape:
      logits = train_x @ weights + bias
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(train_y, logits))
      loss += 1e-3 * tf.reduce_sum(weights * weights)
    optimizer.apply_gradients(zip(tape.gradient(loss, [weights, bias]), [weights, bias]))
  predictions = np.argmax(test_x @ weights.numpy() + bias.numpy(), 1)
  return float(np.mean(predictions == test_y))


def main(argv):
  del argv
  tokenizer = XLNetTokenizer(FLAGS.sp_path)
  directory = FLAGS.task_dir
  task = transfer.load_study_task(transfer.Task("probe", f"{directory}/train.jsonl",
                                                f"{directory}/dev.jsonl",
                                                f"{directory}/test.jsonl"),
                                  tokenizer, FLAGS.max_seq_length)
  stored = [b for b in FLAGS.backbones if b != "random"]
  if not stored:
    raise app.UsageError("--backbones needs at least one directory (for the architecture)")
  runtime = dict(mem_len=FLAGS.max_seq_length, reuse_len=0, bi_data=False)
  for name in FLAGS.backbones:
    if name == "random":
      keras.utils.set_random_seed(FLAGS.seed)
      model = XLNetModel(XLNetModel.from_pretrained(stored[0], **runtime).config)
    else:
      model = XLNetModel.from_pretrained(name, **runtime)
    train = layer_features(model, task.splits["train"])
    dev = layer_features(model, task.splits["dev"])
    accuracies = [probe_accuracy(a, task.splits["train"]["label"], b, task.splits["dev"]["label"],
                                 len(task.labels), FLAGS.probe_steps)
                  for a, b in zip(train, dev)]
    half = len(accuracies) // 2
    print(f"{name}: dev accuracy, mean-pooled, embedding then layers 1..L: "
          f"{[round(a, 3) for a in accuracies[:half]]}")
    print(f"{name}: dev accuracy, last position (<cls>), embedding then layers 1..L: "
          f"{[round(a, 3) for a in accuracies[half:]]}")


def entry():
  """The console script (setup.cfg) and run/probe_features.py."""
  cli.run(main, usage=__doc__)
