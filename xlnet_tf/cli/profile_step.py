"""Where a forward or train step spends its time: TensorFlow profiler events summed by op type.

  python run/profile_step.py --size=base --shape=4x128 --dtype=bfloat16 --mode=train

Runs the same workload as run/benchmark.py (xlnet_tf.benchmarks.steps: random ids, seq_len/6
predictions, AdamW step for `train`), prints the step time, then one profiled step as a table:
total milliseconds per op type (XLA fusions by name) with the number of events. With
--inter_op_threads=1 ops do not overlap, so the column sums to about the step time; XLA
launches ("Execute...") contain the fusions listed below them.
"""

import collections
import glob
import re
import tempfile
import time

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.benchmarks.steps import build_xlnet_tf_step

flags.DEFINE_string("size", "base", "Model size from run/benchmark.py: tiny, base, large.")
flags.DEFINE_string("shape", "4x128", "batch x seq_len.")
flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "Precision.")
flags.DEFINE_enum("mode", "train", ["forward", "train"], "What to profile.")
flags.DEFINE_bool("xla", None, "Compile the step with XLA (default: float32 yes, bfloat16 no).")
flags.DEFINE_bool("fused", True, "The compiled kernels of xlnet_tf.modeling.ops (--nofused: "
                  "the plain TensorFlow path, XLNetModel(fused=False)).")
flags.DEFINE_integer("inter_op_threads", 0, "TensorFlow inter-op threads (0 = default).")
flags.DEFINE_integer("top", 30, "Rows to print.")
FLAGS = flags.FLAGS

_SKIPPED = ("Process", "ThreadpoolListener", "ParallelFor", "BlockUntilReady",
            "ExecutorDoneCallback")


def op_times(logdir):
  """{op type or XLA fusion name: (milliseconds, events)} from the profile in logdir."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  space = xplane_pb2.XSpace()
  with open(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)[0], "rb") as handle:
    space.ParseFromString(handle.read())
  totals, counts = collections.Counter(), collections.Counter()
  for plane in space.planes:
    for line in plane.lines:
      if not line.name.startswith("tf_"):  # Python and host-side spans, not ops
        continue
      for event in line.events:
        name = plane.event_metadata[event.metadata_id].name
        if any(skip in name for skip in _SKIPPED):
          continue
        key = re.sub(r"\.\d+$", "", name.split(":")[-1].strip())
        totals[key] += event.duration_ps / 1e9
        counts[key] += 1
  return {key: (totals[key], counts[key]) for key in totals}


def main(argv):
  del argv
  import tensorflow as tf
  if FLAGS.inter_op_threads:
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.inter_op_threads)
  batch, seq_len = (int(v) for v in FLAGS.shape.split("x"))
  spec = dict(size=FLAGS.size, batch=batch, seq_len=seq_len, dtype=FLAGS.dtype, mode=FLAGS.mode,
              jit=FLAGS.xla, fused=FLAGS.fused)
  run = build_xlnet_tf_step(spec)
  run()
  run()
  times = []
  for _ in range(3):
    start = time.perf_counter()
    run()
    times.append(time.perf_counter() - start)
  print(f"{FLAGS.mode} {FLAGS.size} {FLAGS.shape} {FLAGS.dtype}: {min(times):.3f} s per step")
  logdir = tempfile.mkdtemp()
  tf.profiler.experimental.start(logdir)
  run()
  tf.profiler.experimental.stop()
  rows = sorted(op_times(logdir).items(), key=lambda item: -item[1][0])
  print(f"{'ms':>9} {'events':>7}  op")
  for name, (milliseconds, events) in rows[:FLAGS.top]:
    print(f"{milliseconds:9.1f} {events:7d}  {name[:90]}")


def entry():
  """The console script (setup.cfg) and run/profile_step.py."""
  cli.run(main, usage=__doc__)
