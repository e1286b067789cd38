"""Exports a fine-tuned head (or the backbone) as a SavedModel for TF Serving.

  python run/export.py --model_dir=out/sst-2/best --head=classifier \
      --sp_path=spiece.model --export_base=serving --model_name=sst2 --max_seq_length=128

A head's construction (class count, pooling, ...) comes from the head.json the fine-tuning run
saved beside the weights; the labels.json saved there is copied into the SavedModel's assets
(predicted_label indexes it). Directories without head.json take --num_classes (default: the
labels.json count, else 2), --summary_type and --task_name.

--dtype=bfloat16 serves in bfloat16 (float32 outputs), for CPUs with bfloat16 matmuls.
"""

import os

from absl import flags
from xlnet_tf import cli  # before TensorFlow loads: see xlnet_tf/cli.py
import keras

from xlnet_tf import XLNetConfig, XLNetModel, checkpoints
from xlnet_tf.errors import UserInputError
from xlnet_tf.export import export_saved_model
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.heads.multiple_choice import XLNetMultipleChoice
from xlnet_tf.heads.question_answering import XLNetQuestionAnswering
from xlnet_tf.heads.token_classifier import XLNetTokenClassifier
from xlnet_tf.json_files import read_json
from xlnet_tf.tasks import finetuning
from xlnet_tf.text.tokenizer import check_vocabulary

flags.DEFINE_string("model_dir", None, "Own-format directory (xlnet_config.json + weights).")
flags.DEFINE_enum("head", "classifier", ["classifier", "regression", "multiple_choice",
                                         "question_answering", "token_classifier", "backbone"],
                  "What the weights are.")
flags.DEFINE_integer("num_classes", None, "Classes of a classifier (labels of a token "
                     "classifier). Default: head.json's, else the labels in "
                     "--model_dir/labels.json, else 2.")
flags.DEFINE_string("summary_type", "last", "Pooling of a classifier.")
flags.DEFINE_string("task_name", "task", "Task name of a classifier (original names).")
flags.DEFINE_string("sp_path", None, "SentencePiece model (copied into the assets).")
flags.DEFINE_bool("uncased", False, "Lower-case the text.")
flags.DEFINE_bool("text_pairs", False, "serving_default takes text and text_b.")
flags.DEFINE_integer("max_seq_length", 128, "Longest input; longer texts are truncated.")
flags.DEFINE_string("export_base", "serving", "TF Serving's model base path.")
flags.DEFINE_string("model_name", "xlnet", "Model name.")
flags.DEFINE_integer("version", 1, "Model version.")
flags.DEFINE_bool("xla", False, "Keep the element-wise regions XLA-compiled: faster on CPU; "
                  "the model server then needs --xla_cpu_compilation_enabled=true.")
flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16", "float16"],
                  "Compute dtype of the served graph (mixed precision: float32 weights, "
                  "float32 outputs).")
flags.mark_flags_as_required(["model_dir", "sp_path"])
FLAGS = flags.FLAGS


# The head class each --head exports (the backbone is XLNetModel itself), and the argument of
# its class count (what --num_classes sets).
HEAD_CLASSES = {"classifier": XLNetClassifier, "regression": XLNetClassifier,
                "multiple_choice": XLNetMultipleChoice,
                "question_answering": XLNetQuestionAnswering,
                "token_classifier": XLNetTokenClassifier}
CLASS_COUNT = {"classifier": "num_classes", "regression": "num_classes",
               "token_classifier": "num_labels"}


def head_arguments(labels):
  """The constructor arguments of the --head model: those in --model_dir/head.json (the
  fine-tuning run wrote them: class count, pooling, ...), else from the flags. A flag given
  against head.json, a class count other than labels.json's, or a head.json of another head is
  an error."""
  path = os.path.join(FLAGS.model_dir, checkpoints.own.HEAD_FILE)
  count_key = CLASS_COUNT.get(FLAGS.head)
  if os.path.exists(path):
    arguments = _stored_head_arguments(path)
    source = path
  else:
    pooled = {"summary_type": FLAGS.summary_type, "task_name": FLAGS.task_name}
    arguments = dict({"classifier": pooled, "regression": pooled,
                      "multiple_choice": {"summary_type": FLAGS.summary_type}}.get(FLAGS.head, {}))
    if count_key:
      arguments[count_key] = (1 if FLAGS.head == "regression" else
                              FLAGS.num_classes or (len(labels) if labels else 2))
    source = "--num_classes"
  count = arguments.get(count_key)
  if labels is not None and count is not None and count != len(labels):
    raise UserInputError(f"{source}: {count} classes, but {FLAGS.model_dir}/"
                         f"{finetuning.LABELS_FILE} lists {len(labels)} labels")
  return arguments


def _stored_head_arguments(path):
  head_class = HEAD_CLASSES[FLAGS.head]
  try:
    arguments = read_json(path)
  except ValueError as error:
    raise UserInputError(f"{path}: not valid JSON ({error})") from None
  stored_class = arguments.pop("class", None) if isinstance(arguments, dict) else None
  if stored_class != head_class.__name__:
    raise UserInputError(f"{path}: holds a {stored_class} head; --head={FLAGS.head} exports "
                         f"a {head_class.__name__}")
  count = arguments.get(CLASS_COUNT.get(FLAGS.head))
  if head_class is XLNetClassifier and (count == 1) != (FLAGS.head == "regression"):
    raise UserInputError(f"{path}: num_classes {count} is a "
                         f"{'regression' if count == 1 else 'classifier'} head, not "
                         f"--head={FLAGS.head}")
  given = {"num_classes": CLASS_COUNT.get(FLAGS.head), "summary_type": "summary_type",
           "task_name": "task_name"}
  for flag, key in given.items():
    if FLAGS[flag].present and key in arguments and FLAGS[flag].value != arguments[key]:
      raise UserInputError(f"--{flag}={FLAGS[flag].value}, but {path} has {key} "
                           f"{arguments[key]!r}")
  return arguments


def main(argv):
  del argv
  if FLAGS.dtype != "float32":
    keras.mixed_precision.set_global_policy(f"mixed_{FLAGS.dtype}")
  config_path = os.path.join(FLAGS.model_dir, checkpoints.own.CONFIG_FILE)
  config = XLNetConfig.from_json_file(config_path, dropout=0.0, dropatt=0.0, mem_len=0,
                                      reuse_len=0, bi_data=False)
  check_vocabulary(FLAGS.sp_path, config, config_path)
  labels = finetuning.saved_labels(FLAGS.model_dir)
  backbone = XLNetModel(config)
  model = (backbone if FLAGS.head == "backbone" else
           HEAD_CLASSES[FLAGS.head](backbone, **head_arguments(labels)))
  checkpoints.load_own_checkpoint(model, FLAGS.model_dir)
  path = export_saved_model(model, FLAGS.sp_path, FLAGS.export_base, FLAGS.model_name,
                            FLAGS.max_seq_length, FLAGS.version, FLAGS.text_pairs, FLAGS.uncased,
                            xla=FLAGS.xla,
                            labels=labels if FLAGS.head in ("classifier", "token_classifier")
                            else None)
  print(f"Wrote {path}")


if __name__ == "__main__":
  cli.run(main)
