"""Greedy generation of an LM quantized to int8 against the same LM in float32, on prompts
from the documents run/pretrain.py holds out of its corpus: how often the next tokens agree
and how soon the continuations differ:

  python run/pretrain.py                          # the main job: pretrain_output/
  python run/quantized_generation.py --model_dir=pretrain_output/model/lm \
      --sp_path=pretrain_output/data/spiece.model

Prints the result as JSON (docs/performance.md, "Accuracy on a task, and greedy tokens").
"""

import json

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.utils.json_files import write_json
from xlnet_tf.benchmarks import quantized_generation

flags.DEFINE_string("model_dir", None, "An LM directory (any layout).")
flags.DEFINE_string("sp_path", None, "SentencePiece model (default: the directory's).")
flags.DEFINE_integer("prompt_tokens", 64, "Pieces per prompt.", lower_bound=1)
flags.DEFINE_integer("new_tokens", 32, "Tokens generated after each prompt.", lower_bound=1)
flags.DEFINE_integer("rows", 64, "Prompts.", lower_bound=1)
flags.DEFINE_string("output", None, "Also write the result as JSON here.")
flags.mark_flag_as_required("model_dir")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  result = quantized_generation.measure(FLAGS.model_dir, FLAGS.sp_path, FLAGS.prompt_tokens,
                                        FLAGS.new_tokens, FLAGS.rows)
  print(json.dumps(result, indent=1))
  if FLAGS.output:
    write_json(FLAGS.output, result)


def entry():
  """The console script (setup.cfg) and run/quantized_generation.py."""
  cli.run(main, usage=__doc__)
