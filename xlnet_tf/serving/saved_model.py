"""SavedModels for TF Serving with the tokenizer inside the graph.

Layout: `<export_base>/<model_name>/<version>/`. Signatures:
  serving_default  raw strings -> outputs: the original preprocessing, SentencePiece
                   (tensorflow-text), the `A <sep> B <sep> <cls>` packing with longest-first
                   truncation and left padding, exactly as the Python input builders;
  serve_ids        input_ids / segment_ids int32 and input_mask float32 [B, T].
Each exportable model states what it serves: `serving_outputs(features)` (classifier ->
logits, probabilities, predicted_label; regression -> score; question answering -> start/end
top indices and log-probabilities, answerability score; tagger -> logits, predicted_labels;
backbone -> pooled (last position) and sequence features), optionally
`serving_features(features, sep_id)` (extra inputs it derives from the packed ids, e.g. the
QA head's p_mask) and `serving_text_inputs` (the text signature's input names). The
SavedModel needs only `tensorflow` and `tensorflow_text` (for SentencepieceOp) where it is
loaded (serving.saved_model_check loads it so). The export base, the model directory and the
SentencePiece model may be remote (gs://..., any tf.io.gfile file system: utils.files).

A multi-label classifier (head.json: multi_label) serves logits, probabilities (each label's
sigmoid), thresholds (the thresholds.json a training run tuned on dev, else 0.5 each) and
predicted_labels (multi-hot: probability >= threshold).

With labels (a classifier's or tagger's), both signatures also return the names as strings
(`label_name_outputs`): predicted_label_name [B] beside predicted_label; a multi-label
classifier's predicted_label_names [B, C] (the label where predicted, else ""); a tagger's
predicted_label_names [B, T] beside predicted_labels.
"""

import contextlib
import os
from typing import Callable, Dict, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf import checkpoints
from xlnet_tf.checkpoints.naming import backbone_of
from xlnet_tf.checkpoints.labels import LABELS_FILE, save_labels, saved_labels, saved_thresholds
from xlnet_tf.checkpoints.own import class_count
from xlnet_tf.config import XLNetConfig
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError, require
from xlnet_tf.heads import registry
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.heads.multiple_choice import XLNetMultipleChoice
from xlnet_tf.heads.question_answering import XLNetQuestionAnswering
from xlnet_tf.heads.token_classifier import XLNetTokenClassifier
from xlnet_tf.utils.json_files import write_json
from xlnet_tf.modeling.backbone import XLNetModel
from xlnet_tf.modeling.ops import compile as compile_ops
from xlnet_tf.modeling.ops.int8_packing import constant_int8_weights
from xlnet_tf.serving.onnx_quantization import (TOLERANCE, Int8CheckError,
                                                max_relative_error)
from xlnet_tf.text.in_graph_tokenizer import InGraphTokenizer
from xlnet_tf.text.packing import TextPacker
from xlnet_tf.text.tokenizer import check_vocabulary
from xlnet_tf.serving.version_directories import check_version_free, staged_version

WARMUP_FILE = "tf_serving_warmup_requests"
QUANTIZE_MODES = ("none", "int8")
LONG_DOCUMENTS_FILE = "long_documents.json"  # assets of a classifier reading S segments
# The head class each --head value exports ("backbone": XLNetModel itself), and the name of its
# class-count argument.
EXPORT_HEADS = {"classifier": XLNetClassifier, "regression": XLNetClassifier,
                "multiple_choice": XLNetMultipleChoice,
                "question_answering": XLNetQuestionAnswering,
                "token_classifier": XLNetTokenClassifier}
CLASS_COUNT = {"classifier": "num_classes", "regression": "num_classes",
               "token_classifier": "num_labels"}
# Without head.json: the pooling arguments of each head, and their defaults.
POOLING_ARGUMENTS = {"classifier": ("summary_type", "task_name"),
                     "regression": ("summary_type", "task_name"),
                     "multiple_choice": ("summary_type",)}
HEAD_DEFAULTS = {"summary_type": "last", "task_name": "task"}


def load_exportable_model(model_dir: str, head: str = "classifier",
                          num_classes: Optional[int] = None, summary_type: Optional[str] = None,
                          task_name: Optional[str] = None, sp_path: Optional[str] = None):
  """The model to export from an own-format directory a fine-tuning run wrote.

  The head is built as its head.json says (class count, pooling, ...); `num_classes`,
  `summary_type` and `task_name` fill in for a directory without head.json (defaults: the
  labels.json count else 2, "last", "task") and must agree with head.json when both are given.
  labels.json, when there, must count the head's classes. Dropout off, no memory, except for a
  classifier trained on long documents (head.json's max_segments > 1): it keeps the mem_len
  it was trained with (xlnet_config.json). The weights load with load_own_checkpoint (a
  quantized directory's model comes back quantized).

  Args:
    model_dir: the directory (xlnet_config.json, model.weights.h5, maybe head.json and
      labels.json).
    head: what to build: "backbone" (XLNetModel) or a key of EXPORT_HEADS ("classifier",
      "regression", "multiple_choice", "question_answering", "token_classifier").
    num_classes: the class count (num_labels for a tagger), without head.json.
    summary_type: the classifier's or multiple choice's pooling, without head.json.
    task_name: the classifier's task name (its original variable scope), without head.json.
    sp_path: the SentencePiece model to export with, checked first against the config's
      n_token.

  Returns:
    (model, labels): labels.json's labels for a classifier or tagger (None without the
    file), else None.

  Raises:
    UserInputError: when head.json disagrees with `head` or the arguments given, labels.json
      does not count the classes, or the SentencePiece model has more pieces than n_token.
    FileNotFoundError: without xlnet_config.json or model.weights.h5.
    CheckpointMismatchError: when the weights do not fit the model built.
  """
  config_path = os.path.join(model_dir, checkpoints.own.CONFIG_FILE)
  stored_config = XLNetConfig.from_json_file(config_path, dropout=0.0, dropatt=0.0)
  config = stored_config.for_finetuning()
  if sp_path:
    check_vocabulary(sp_path, config, config_path)
  labels = saved_labels(model_dir)
  if head == "backbone":
    model = XLNetModel(config)
  else:
    given = {CLASS_COUNT.get(head, "num_classes"): num_classes, "summary_type": summary_type,
             "task_name": task_name}
    arguments = _head_arguments(model_dir, head, {k: v for k, v in given.items() if v is not None},
                                labels)
    if _read_segments(model_dir, arguments, stored_config) > 1:
      config = stored_config.for_finetuning(mem_len=stored_config.mem_len)
    model = EXPORT_HEADS[head](XLNetModel(config), **arguments)
  checkpoints.load_own_checkpoint(model, model_dir)
  if getattr(model, "multi_label", False) and labels is not None:
    model.thresholds = saved_thresholds(model_dir, labels) or model.thresholds  # else 0.5
  return model, labels if head in ("classifier", "token_classifier") else None


def _head_arguments(model_dir, head, given, labels):
  """The head's constructor arguments: head.json's, checked against `given` and labels.json."""
  count_key = CLASS_COUNT.get(head)
  path = os.path.join(model_dir, checkpoints.own.HEAD_FILE)
  if files.exists(path):
    arguments = _stored_head_arguments(model_dir, head)
    for key, value in given.items():
      if key in arguments and arguments[key] != value:
        raise UserInputError(f"{path}: {key} is {arguments[key]!r}, not {value!r} as given "
                             f"(--{'num_classes' if key == count_key else key})")
    source = path
  else:
    arguments = {key: given.get(key, HEAD_DEFAULTS[key]) for key in POOLING_ARGUMENTS.get(head, ())}
    if count_key:
      arguments[count_key] = 1 if head == "regression" else given.get(
          count_key, len(labels) if labels else 2)
    source = "--num_classes"
  count = arguments.get(count_key)
  if labels is not None and count is not None and count != len(labels):
    raise UserInputError(f"{source}: {count} classes, but {os.path.join(model_dir, LABELS_FILE)} "
                         f"lists {len(labels)} labels")
  return arguments


def _read_segments(model_dir, arguments, stored_config):
  """head.json's max_segments (1 without), checked: long documents need the stored memory."""
  max_segments = arguments.get("max_segments", 1)
  path = os.path.join(model_dir, checkpoints.own.HEAD_FILE)
  if not (isinstance(max_segments, int) and max_segments >= 1):
    raise UserInputError(f"{path}: max_segments must be an integer >= 1; got {max_segments!r}")
  if max_segments > 1 and stored_config.mem_len < 1:
    raise UserInputError(
        f"{path}: max_segments is {max_segments}, but "
        f"{os.path.join(model_dir, checkpoints.own.CONFIG_FILE)} has mem_len "
        f"{stored_config.mem_len}: the segments are read with memory; save the classifier as "
        "run/classifier.py --max_segments --mem_len does")
  return max_segments


def _stored_head_arguments(model_dir, head):
  """head.json's constructor arguments, checked to be of the head --head names."""
  path = os.path.join(model_dir, checkpoints.own.HEAD_FILE)
  head_class = EXPORT_HEADS[head]
  stored_class, arguments = registry.saved_head(model_dir)
  if stored_class is not head_class:
    raise UserInputError(f"{path}: the head is {stored_class.__name__}, not the "
                         f"{head_class.__name__} of --head={head}")
  count = arguments.get("num_classes")
  if head_class is XLNetClassifier and (count == 1) != (head == "regression"):
    kind = "regression" if count == 1 else "classifier"
    raise UserInputError(f"{path}: num_classes {count} makes a {kind} head, not --head={head}")
  return arguments


def ids_serving_function(model, sep_id: int, labels: Optional[Sequence[str]] = None):
  """(input_ids, segment_ids, input_mask) -> the model's serving outputs, floating ones in
  float32 whatever the compute dtype: the serve_ids signature (and, without `labels`, the ONNX
  and LiteRT files of onnx_litert.py). `sep_id` is the <sep> id the model's serving_features
  may need; with `labels`, the predicted labels' names too (label_name_outputs)."""
  add_features = getattr(model, "serving_features", lambda features, sep_id: features)

  def features_from(input_ids, segment_ids, input_mask):
    features = add_features({"input_ids": input_ids, "segment_ids": segment_ids,
                             "input_mask": input_mask}, sep_id)
    outputs = {name: tf.cast(value, tf.float32) if value.dtype.is_floating else value
               for name, value in model.serving_outputs(features).items()}
    if labels is not None:
      outputs.update(label_name_outputs(model, outputs, labels))
    return outputs

  return features_from


def label_name_outputs(model, outputs, labels: Sequence[str]) -> Dict[str, tf.Tensor]:
  """The names of the predicted labels, beside the indices in `outputs` (a classifier's or
  tagger's serving outputs): predicted_label_name [B] = labels[predicted_label];
  a multi-label classifier's predicted_label_names [B, C], labels[c] where predicted_labels
  [:, c] is 1 and "" elsewhere (positions as the probabilities'); a tagger's
  predicted_label_names [B, T] = labels[predicted_labels]. Other models: none."""
  if class_count(model) is None:  # multiple choice: its predicted_label indexes the options
    return {}
  names = tf.constant(list(labels), tf.string)
  if "predicted_label" in outputs:
    return {"predicted_label_name": tf.gather(names, outputs["predicted_label"])}
  if "predicted_labels" not in outputs:  # regression
    return {}
  predicted = outputs["predicted_labels"]
  if getattr(model, "multi_label", False):
    chosen = tf.cast(predicted, tf.bool)
    return {"predicted_label_names": tf.where(chosen, tf.broadcast_to(names, tf.shape(chosen)),
                                              tf.constant("", tf.string))}
  return {"predicted_label_names": tf.gather(names, predicted)}


def ids_input_signature(model, max_seq_length: int):
  """[input_ids, segment_ids, input_mask] TensorSpecs [B, T] ([B, C, T] for a model whose text
  inputs include options, [B, S, T] for a classifier of S > 1 long-document segments); builds
  the model with one call (Keras exports only built models)."""
  options = "options" in (getattr(model, "serving_text_inputs", None) or ())
  shape = [None, None, max_seq_length] if options else [None, max_seq_length]
  segments = getattr(model, "max_segments", 1)
  if segments > 1:
    shape = [None, segments, max_seq_length]
  dummy = [1 if size is None else size for size in shape]
  ids_serving_function(model, 0)(tf.zeros(dummy, tf.int32), tf.zeros(dummy, tf.int32),
                                 tf.ones(dummy))
  return [tf.TensorSpec(shape, tf.int32, "input_ids"),
          tf.TensorSpec(shape, tf.int32, "segment_ids"),
          tf.TensorSpec(shape, tf.float32, "input_mask")]


def verification_inputs(model, max_seq_length: int, seed: int = 0) -> Dict[str, np.ndarray]:
  """Three rows with left padding 0, T/4 and T/2 and three segments (A, B, <cls>) ([B, 2, T] for
  multiple choice, [B, S, T] for a classifier of S long-document segments), to compare an
  export with the Keras model."""
  rng = np.random.default_rng(seed)
  n_token = backbone_of(model).config.n_token
  options = "options" in (getattr(model, "serving_text_inputs", None) or ())
  segments = 2 if options else getattr(model, "max_segments", 1)
  rows = 3 * segments
  input_ids = rng.integers(10, n_token, size=[rows, max_seq_length]).astype(np.int32)
  segment_ids = np.zeros([rows, max_seq_length], np.int32)
  input_mask = np.ones([rows, max_seq_length], np.float32)
  for row in range(rows):
    padding = (row % 3) * max_seq_length // 4
    middle = (padding + max_seq_length) // 2
    segment_ids[row, :padding], input_mask[row, :padding] = 4, 0.0
    segment_ids[row, middle:] = 1
    segment_ids[row, -1] = 2
  inputs = {"input_ids": input_ids, "segment_ids": segment_ids, "input_mask": input_mask}
  if segments > 1:
    inputs = {key: value.reshape(3, segments, max_seq_length) for key, value in inputs.items()}
  return inputs



def export_saved_model(model, sp_path: str, export_base: str, model_name: str,
                       max_seq_length: int, version: int = 1, text_pairs: bool = False,
                       lower: bool = False, warmup_requests: int = 3, xla: bool = False,
                       labels: Optional[Sequence[str]] = None, overwrite: bool = False,
                       quantize: str = "none", keep_accents: bool = False,
                       check: Optional[Callable[[str], object]] = None) -> str:
  """Writes a SavedModel for TF Serving, its tokenizer and packing in the graph.

  The directory is `<export_base>/<model_name>/<version>/`, with the signatures
  serving_default (raw strings) and serve_ids (packed ids), assets (the SentencePiece model,
  labels.json) and warm-up requests. It appears complete or not at all
  (version_directories.py: built under a dot name beside it and renamed into place; on a
  remote base, copied with saved_model.pb last).

  serving_default takes `text` (and `text_b` with text_pairs); a question-answering model takes
  `question` and `context`, packed `context <sep> question <sep> <cls>` as the SQuAD builder
  does, one window: a longer pair is truncated longest-first. Answer positions index the
  returned window. A multiple-choice model takes `text` [B] and `options` [B, C]. The graph
  computes in the model's dtype policy (a model built under mixed_bfloat16 serves in bfloat16,
  1.6-1.7x float32's speed on an AVX512_BF16 CPU); the outputs are float32 either way.

  A quantized model (quantized here, or by the caller) is traced in
  ops.int8_packing.constant_int8_weights unless `xla`: its int8 kernels become constants of the
  graph, multiplied by oneDNN's int8 kernel (QuantizedMatMulWithBias, in TensorFlow's x86
  builds), 1.5-1.7x the float32 SavedModel on a CPU with VNNI (docs/benchmarks.md).

  A classifier with max_segments S > 1 reads each text (or pair) as S segments of
  max_seq_length (text.packing's layout, the split of the Python builders) with memory:
  serve_ids then takes [B, S, max_seq_length], and assets/long_documents.json records S, the
  segment length and mem_len.

  Args:
    model: the XLNetModel or head to export (one with serving_outputs: the backbone,
      classifier/regression, multiple choice, question answering, token tagging).
    sp_path: the SentencePiece model the graph tokenizes with (copied into assets/).
    export_base: the base directory of the model server, local or remote.
    model_name: the model's directory under it.
    max_seq_length: T, the packed length (S segments of T for a long-document classifier).
    version: the version directory's number.
    text_pairs: serving_default takes `text` and `text_b` (a classifier of pairs).
    lower: the tokenizer lower-cases (XLNetTokenizer's setting).
    warmup_requests: how many warm-up requests to write to assets.extra (0: none).
    xla: keep the model's compiled element-wise regions XLA-compiled (faster on CPU; the model
      server must then run with --xla_cpu_compilation_enabled=true, CPU only); False writes
      them as plain ops, which any TF Serving runs.
    labels: a classifier's or tagger's classes in order: written to assets/labels.json, and
      the signatures return the predicted labels' names beside their indices
      (label_name_outputs: predicted_label_name, or predicted_label_names).
    overwrite: swap the new directory in for an existing version (local bases only); without
      it an existing version is refused before any work.
    quantize: "none", or "int8": quantize the float model first (`model.quantize("int8")`,
      which changes it) and check it on `verification_inputs` against its float outputs (max
      relative error of the floating outputs within onnx_quantization.TOLERANCE).
    keep_accents: the tokenizer keeps accents (XLNetTokenizer's setting).
    check: called with the written directory before it is placed (e.g.
      serving.saved_model_check.check_saved_model bound to the model); what it raises places
      nothing.

  Returns:
    The version directory's path.

  Raises:
    TypeError: for a model without serving_outputs.
    UserInputError: for an existing version (naming --version) without overwrite, an
      unknown quantize mode, a model already quantized with quantize="int8", or labels not
      naming one label per class.
    Int8CheckError: when the int8 model's outputs differ beyond the tolerance (nothing is
      written).
  """
  if not hasattr(model, "serving_outputs"):
    raise TypeError(f"Cannot export {type(model).__name__}: it has no serving_outputs() "
                    "(exportable: the backbone, classifier/regression, multiple choice, "
                    "question answering, token tagging)")
  check_version_free(version_directory(export_base, model_name, version), overwrite)
  require(quantize in QUANTIZE_MODES, "quantize", f"one of {list(QUANTIZE_MODES)}",
          repr(quantize))
  if labels is not None and class_count(model) is not None:
    require(len(labels) == class_count(model), "labels",
            f"one name per class of the {type(model).__name__} ({class_count(model)})",
            len(labels))
  if quantize == "int8":
    quantized_within_tolerance(model, max_seq_length)
  constant_weights = getattr(model, "quantization", None) and not xla
  with contextlib.nullcontext() if xla else compile_ops.without_xla(), (
      constant_int8_weights() if constant_weights else contextlib.nullcontext()):
    return _export(model, sp_path, export_base, model_name, max_seq_length, version=version,
                   text_pairs=text_pairs, lower=lower, keep_accents=keep_accents,
                   warmup_requests=warmup_requests, labels=labels, overwrite=overwrite,
                   check=check)


def quantized_within_tolerance(model, max_seq_length: int) -> float:
  """Quantizes the float `model` to int8 in place and returns the max relative error of its
  floating serving outputs against the float ones on `verification_inputs`; Int8CheckError
  (after quantizing) beyond onnx_quantization.TOLERANCE."""
  if getattr(model, "quantization", None) is not None:
    raise UserInputError(f"{type(model).__name__} '{model.name}' is already quantized "
                         f"({model.quantization}); export it with quantize='none'")
  inputs = [tf.constant(value) for value in verification_inputs(model, max_seq_length).values()]
  float_outputs = _numpy(ids_serving_function(model, 0)(*inputs))
  model.quantize("int8")
  with compile_ops.without_xla(), constant_int8_weights():
    int8_outputs = _numpy(tf.function(ids_serving_function(model, 0))(*inputs))
  error = max_relative_error(float_outputs, int8_outputs)
  if not error <= TOLERANCE:  # NaN included
    raise Int8CheckError(f"int8 check failed: the quantized model's outputs differ from the "
                         f"float model's by {error:.3g} relative (> {TOLERANCE}); nothing was "
                         "written")
  return error


def _numpy(outputs):
  return {name: value.numpy() for name, value in outputs.items()}


def _export(model, sp_path, export_base, model_name, max_seq_length, *, version, text_pairs,
            lower, keep_accents, warmup_requests, labels, overwrite, check):
  tokenizer = InGraphTokenizer(sp_path, lower=lower, keep_accents=keep_accents)
  num_segments = getattr(model, "max_segments", 1)
  packer = TextPacker(tokenizer, max_seq_length, num_segments)
  text_names = getattr(model, "serving_text_inputs", None) or (
      ("text", "text_b") if text_pairs else ("text",))
  features_from = ids_serving_function(model, packer.sep, labels)
  ids_signature = ids_input_signature(model, max_seq_length)
  text_signature = [tf.TensorSpec([None, None] if name == "options" else [None], tf.string,
                                  name) for name in text_names]
  archive = keras.export.ExportArchive()
  archive.track(model)
  archive.track(packer)
  archive.add_endpoint("serve_ids", features_from, input_signature=ids_signature)
  archive.add_endpoint(
      "serving_default",
      lambda *strings: features_from(*packer.pack_named(dict(zip(text_names, strings)))),
      input_signature=text_signature)
  path = version_directory(export_base, model_name, version)
  # A fault of the disk names the version, not a file of its work folder (or none).
  with staged_version(path, overwrite) as staging, files.named_on_failure(path):
    archive.write_out(staging, verbose=False)
    assets = os.path.join(staging, "assets")
    files.makedirs(assets)
    files.copy(sp_path, os.path.join(assets, os.path.basename(sp_path)))
    if labels is not None:
      save_labels(assets, labels)
    if num_segments > 1:
      write_json(os.path.join(assets, LONG_DOCUMENTS_FILE),
                 {"max_segments": num_segments, "max_seq_length": max_seq_length,
                  "mem_len": model.backbone.config.mem_len})
    if warmup_requests:
      examples = {name: ["A warm-up request for the model server."] * 2 for name in text_names}
      if "options" in text_names:
        examples["options"] = [["one option", "another option"]] * 2
      write_warmup_requests(staging, model_name, "serving_default", examples, warmup_requests)
    if check is not None:
      check(staging)
  return path


def version_directory(export_base: str, model_name: str, version: int) -> str:
  """`<export_base>/<model_name>/<version>` (absolute when local)."""
  return files.absolute(os.path.join(export_base, model_name, str(version)))


# ---- TF Serving warm-up requests (PredictionLog records), written without the serving apis --

def _varint(value: int) -> bytes:
  out = bytearray()
  while True:
    byte = value & 0x7F
    value >>= 7
    out.append(byte | (0x80 if value else 0))
    if not value:
      return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
  """A length-delimited protobuf field."""
  return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def prediction_log(model_name: str, signature: str, inputs) -> bytes:
  """tensorflow.serving.PredictionLog{predict_log{request{model_spec, inputs}}}, serialized."""
  model_spec = _field(1, model_name.encode()) + _field(3, signature.encode())
  request = _field(1, model_spec)
  for name, value in inputs.items():
    array = np.asarray(value)
    if array.dtype.kind in "US":
      array = array.astype(object)
    tensor = tf.make_tensor_proto(array).SerializeToString()
    request += _field(2, _field(1, name.encode()) + _field(2, tensor))
  return _field(6, _field(1, request))


def write_warmup_requests(saved_model_dir: str, model_name: str, signature: str, inputs,
                          count: int) -> str:
  directory = os.path.join(saved_model_dir, "assets.extra")
  files.makedirs(directory)
  path = os.path.join(directory, WARMUP_FILE)
  with tf.io.TFRecordWriter(path) as writer:
    for _ in range(count):
      writer.write(prediction_log(model_name, signature, inputs))
  return path
