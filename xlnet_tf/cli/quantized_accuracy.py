"""int8 against float32 on a fine-tuned classifier's dev set: the accuracy of each, how many
predictions change and how far the logits move:

  python run/quantized_accuracy.py --model_dir=ft/heading/best \
      --data=man/man_heading/dev.jsonl --sp_path=perm12/data/spiece.model --max_seq_length=64 \
      --results_json=int8_accuracy.json

--model_dir: a fine-tuning run's best/ (run/classifier.py --task_name=generic writes it, with
labels.json), loaded as run/export.py loads it; --data: a labelled dev file, read and scored as
run/classifier.py --do_eval reads and scores it; --max_seq_length: the fine-tuning run's. Rows:
float32, int8 (quantize("int8") on a second copy) and int8 traced in constant_int8_weights
(oneDNN's kernel); each with its accuracy, its difference from float32 in points, the
predictions that changed and the logits' mean relative error
(docs/performance.md, "Accuracy on a task, and greedy tokens").
"""

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.utils.json_files import write_json
from xlnet_tf.benchmarks import quantized_accuracy

flags.DEFINE_string("model_dir", None, "A fine-tuning run's best/.")
flags.DEFINE_string("data", None, "The dev file (CSV/TSV/JSONL, labelled).")
flags.DEFINE_string("sp_path", None, "SentencePiece model (default: --model_dir's).")
flags.DEFINE_bool("uncased", False, "With --sp_path: lower-case the text.")
flags.DEFINE_integer("max_seq_length", 128, "The fine-tuning run's.", lower_bound=2)
flags.DEFINE_integer("batch_size", 32, "Examples per prediction batch.", lower_bound=1)
flags.DEFINE_list("text_columns", None, "text_a[,text_b] (default: found by header name).")
flags.DEFINE_string("results_json", None, "Where the result goes (with the table).")
flags.mark_flags_as_required(["model_dir", "data"])
FLAGS = flags.FLAGS


def main(argv):
  del argv
  result = quantized_accuracy.measure(FLAGS.model_dir, FLAGS.data, FLAGS.max_seq_length,
                                      FLAGS.sp_path, FLAGS.uncased, FLAGS.batch_size,
                                      FLAGS.text_columns)
  result["markdown"] = quantized_accuracy.markdown(result)
  print(f"\n{result['markdown']}\n")
  if FLAGS.results_json:
    write_json(FLAGS.results_json, result)
    print(f"Wrote {FLAGS.results_json}")


def entry():
  """The console script (setup.cfg) and run/quantized_accuracy.py."""
  cli.run(main, usage=__doc__)
