"""int8 against float32 on a fine-tuned classifier's dev set: the accuracy of each, how many
predictions change and how far the logits move (docs/performance.md#quantization; the
command: run/quantized_accuracy.py).

The model: a fine-tuning run's best/ (xlnet_config.json, weights, head.json, labels.json),
built as run/export.py builds it (serving.saved_model.load_exportable_model). The data: a dev
file, read and encoded as run/classifier.py --task_name=generic --do_eval reads it (labels in
labels.json's order), and scored by the same predictions and metrics; max_seq_length: the
fine-tuning run's.
Rows: float32; int8 (XLNetClassifier.quantize("int8") on a second copy, through Keras'
predict: the path a user takes, oneDNN's u8 x s8 kernel on constant weights where this
TensorFlow and CPU have it, onednn_int8 in the JSON; modeling.int8_inference). Each row: dev
accuracy, its difference from float32 in points, the dev examples whose predicted label differs
from float32's, and the mean over examples of the logits' relative error
||logits - logits_float32|| / ||logits_float32||.
"""

import numpy as np

from xlnet_tf.modeling.ops.int8_packing import onednn_available
from xlnet_tf.serving.saved_model import load_exportable_model
from xlnet_tf.tasks import classification
from xlnet_tf.tasks.classification import metrics
from xlnet_tf.text.tokenizer import XLNetTokenizer, saved_tokenizer
from xlnet_tf.utils.errors import UserInputError

FLOAT32, INT8 = "float32", "int8"


def load_classifier(model_dir, sp_path=None, uncased=False):
  """(classifier, tokenizer): the fine-tuned weights as run/export.py loads them, and the
  directory's SentencePiece model unless `sp_path` names one."""
  model, labels = load_exportable_model(model_dir, "classifier", sp_path=sp_path)
  if labels is None or getattr(model, "multi_label", False):
    raise UserInputError(f"{model_dir}: needs one label per example and its labels.json (what "
                         "run/classifier.py --task_name=generic writes beside the best weights)")
  tokenizer = XLNetTokenizer(sp_path, lower=uncased) if sp_path else saved_tokenizer(model_dir)
  if tokenizer is None:
    raise UserInputError(f"--sp_path is required: {model_dir} holds no spiece.model")
  return model, tokenizer


def compare(logits, labels):
  """{row: scores} of the rows' `logits` ({row: [N, C]}, float32 first) against `labels`."""
  reference = np.asarray(logits[FLOAT32], np.float64)
  base = metrics.accuracy(labels, reference.argmax(-1))
  rows = {}
  for name, values in logits.items():
    values = np.asarray(values, np.float64)
    accuracy = metrics.accuracy(labels, values.argmax(-1))
    error = np.linalg.norm(values - reference, axis=-1) / np.linalg.norm(reference, axis=-1)
    rows[name] = {"accuracy": accuracy, "difference_points": round(100.0 * (accuracy - base), 6),
                  "differing_predictions": int((values.argmax(-1) != reference.argmax(-1)).sum()),
                  "logits_mean_relative_error": float(error.mean())}
  return rows


def measure(model_dir, data, max_seq_length=128, sp_path=None, uncased=False, batch_size=32,
            text_columns=None):
  """The rows (compare) of the classifier in `model_dir` on the file `data` (max_seq_length:
  the fine-tuning run's)."""
  model, tokenizer = load_classifier(model_dir, sp_path, uncased)
  task = classification.load_task(classification.TaskDataOptions(
      "generic", files={"dev": data}, text_columns=text_columns, model_dir=model_dir,
      max_seq_length=max_seq_length, max_segments=model.max_segments), tokenizer, ["dev"])
  dev = task.splits["dev"]
  print(f"{data}: {task.reports['dev'].summary()}")
  logits = {FLOAT32: classification.predict_logits(model, dev, batch_size)}
  model, _ = load_classifier(model_dir, sp_path, uncased)  # a second copy, quantized
  model.quantize("int8")
  logits[INT8] = classification.predict_logits(model, dev, batch_size)
  return {"model_dir": model_dir, "data": data, "examples": len(dev["label"]),
          "max_seq_length": max_seq_length, "labels": task.labels,
          "onednn_int8": onednn_available(), "rows": compare(logits, dev["label"])}


def markdown(result):
  """The rows as a markdown table."""
  lines = ["| model | dev examples | accuracy | vs float32 (points) | predictions changed | "
           "logits, mean relative error |", "|---|---:|---:|---:|---:|---:|"]
  for name, row in result["rows"].items():
    lines.append(f"| {name} | {result['examples']:,} | {100 * row['accuracy']:.1f} | "
                 f"{row['difference_points']:+.1f} | {row['differing_predictions']} | "
                 f"{row['logits_mean_relative_error']:.2%} |")
  return "\n".join(lines)
