"""int8 against float on CPU: the forward of one random-weight model as float32 under XLA,
bfloat16, and int8 (Keras' quantize("int8")) through predict, a plain tf.function, XLA and its
exported SavedModel, beside ONNX Runtime int8 on the project's ONNX export of the same model,
in one process, every row in turn each round:

  python run/quantized_speed.py --size=base --batch=4 --seq_len=128 --rounds=8

Prints the best and median time per forward, tokens/s of the best, the ratio to float32 XLA
and to ONNX Runtime int8 (with onnxruntime and tf2onnx installed) and each row's relative
error ||y - y_float32|| / ||y_float32|| of sequence_output (docs/performance.md, "Speed on
CPU").
"""

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.config import SIZE_PRESETS
from xlnet_tf.benchmarks import quantized_speed

flags.DEFINE_enum("size", "base", sorted(SIZE_PRESETS), "Model size (random weights).")
flags.DEFINE_integer("batch", 4, "Batch size.", lower_bound=1)
flags.DEFINE_integer("seq_len", 128, "Sequence length.", lower_bound=2)
flags.DEFINE_integer("rounds", 5, "Rounds, each running every row in turn.", lower_bound=1)
flags.DEFINE_integer("calls", 3, "Forwards per row and round.", lower_bound=1)
FLAGS = flags.FLAGS


def main(argv):
  del argv
  rows = quantized_speed.measure(FLAGS.size, FLAGS.batch, FLAGS.seq_len, FLAGS.rounds,
                                 FLAGS.calls)
  print(f"\n{FLAGS.size}, {FLAGS.batch}x{FLAGS.seq_len}, forward; {FLAGS.rounds} rounds of "
        f"{FLAGS.calls} calls\n")
  print(quantized_speed.markdown(rows, FLAGS.batch * FLAGS.seq_len))


def entry():
  """The console script (setup.cfg) and run/quantized_speed.py."""
  cli.run(main, usage=__doc__)
