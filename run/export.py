"""Exports a fine-tuned head (or the backbone) as a SavedModel for TF Serving.

  python run/export.py --model_dir=out/sst-2/best --head=classifier \
      --sp_path=spiece.model --export_base=serving --model_name=sst2 --max_seq_length=128

A classifier's or tagger's class count comes from the labels.json the fine-tuning run saved
beside the weights (copied into the SavedModel's assets: predicted_label indexes it).

--dtype=bfloat16 serves in bfloat16 (float32 outputs), for CPUs with bfloat16 matmuls.
"""

from absl import app
from absl import flags
from xlnet_tf import cli  # before TensorFlow loads: see xlnet_tf/cli.py
import keras

from xlnet_tf import XLNetConfig, XLNetModel, checkpoints
from xlnet_tf.export import export_saved_model
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.heads.multiple_choice import XLNetMultipleChoice
from xlnet_tf.heads.question_answering import XLNetQuestionAnswering
from xlnet_tf.heads.token_classifier import XLNetTokenClassifier
from xlnet_tf.tasks import finetuning

flags.DEFINE_string("model_dir", None, "Own-format directory (xlnet_config.json + weights).")
flags.DEFINE_enum("head", "classifier", ["classifier", "regression", "multiple_choice",
                                         "question_answering", "token_classifier", "backbone"],
                  "What the weights are.")
flags.DEFINE_integer("num_classes", None, "Classes of a classifier (labels of a token "
                     "classifier). Default: the labels in --model_dir/labels.json, else 2.")
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


def main(argv):
  del argv
  if FLAGS.dtype != "float32":
    keras.mixed_precision.set_global_policy(f"mixed_{FLAGS.dtype}")
  config = XLNetConfig.from_json_file(f"{FLAGS.model_dir}/xlnet_config.json", dropout=0.0,
                                      dropatt=0.0, mem_len=0, reuse_len=0, bi_data=False)
  backbone = XLNetModel(config)
  labels = finetuning.saved_labels(FLAGS.model_dir)
  if labels is not None and FLAGS.num_classes not in (None, len(labels)):
    raise app.UsageError(f"--num_classes={FLAGS.num_classes}, but {FLAGS.model_dir}/"
                         f"{finetuning.LABELS_FILE} lists {len(labels)} labels")
  num_classes = FLAGS.num_classes or (len(labels) if labels else 2)
  model = {"classifier": lambda: XLNetClassifier(backbone, num_classes,
                                                 FLAGS.summary_type, FLAGS.task_name),
           "regression": lambda: XLNetClassifier(backbone, 1, FLAGS.summary_type,
                                                 FLAGS.task_name),
           "multiple_choice": lambda: XLNetMultipleChoice(backbone, FLAGS.summary_type),
           "question_answering": lambda: XLNetQuestionAnswering(backbone),
           "token_classifier": lambda: XLNetTokenClassifier(backbone, num_classes),
           "backbone": lambda: backbone}[FLAGS.head]()
  checkpoints.load_own_checkpoint(model, FLAGS.model_dir)
  path = export_saved_model(model, FLAGS.sp_path, FLAGS.export_base, FLAGS.model_name,
                            FLAGS.max_seq_length, FLAGS.version, FLAGS.text_pairs, FLAGS.uncased,
                            xla=FLAGS.xla,
                            labels=labels if FLAGS.head in ("classifier", "token_classifier")
                            else None)
  print(f"Wrote {path}")


if __name__ == "__main__":
  cli.run(main)
