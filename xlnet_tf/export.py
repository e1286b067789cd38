"""SavedModels for TF Serving with the tokenizer inside the graph.

Layout: `<export_base>/<model_name>/<version>/`. Signatures:
  serving_default  raw strings -> outputs: the original preprocessing, SentencePiece
                   (tensorflow-text), the `A <sep> B <sep> <cls>` packing with longest-first
                   truncation and left padding, exactly as the Python input builders;
  serve_ids        input_ids / segment_ids int32 and input_mask float32 [B, T].
Outputs by head: classifier -> logits, probabilities, predicted_label; regression -> score;
question answering -> start/end top indices and log-probabilities, answerability score;
backbone -> pooled (last position) and sequence features. The SavedModel needs only
`tensorflow` and `tensorflow_text` (for SentencepieceOp) where it is loaded.
"""

import contextlib
import os
import shutil

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf.data.classification import SEG_A, SEG_B, SEG_CLS, SEG_PAD
from xlnet_tf.data.tf_tokenizer import InGraphTokenizer
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.heads.multiple_choice import XLNetMultipleChoice
from xlnet_tf.heads.question_answering import XLNetQuestionAnswering
from xlnet_tf.layers import compiled
from xlnet_tf.model import XLNetModel

WARMUP_FILE = "tf_serving_warmup_requests"


def _keep_lengths(length_a, length_b, room):
  """Lengths after the original longest-first truncation (see truncate_pair), in closed form."""
  fits = length_a + length_b <= room
  keep_a = tf.minimum(length_a, tf.maximum(room - length_b, (room + 1) // 2))
  return (tf.where(fits, length_a, keep_a), tf.where(fits, length_b, room - keep_a))


def _prefix(ragged, keep):
  mask = tf.ragged.range(ragged.row_lengths()) < keep[:, None]
  return tf.ragged.boolean_mask(ragged, mask)


def _left_pad(ragged, length, value):
  """Ragged [B, None] -> dense [B, length], rows aligned to the right."""
  rows = ragged.nrows()
  starts = length - ragged.row_lengths()
  columns = (tf.ragged.range(ragged.row_lengths()) + starts[:, None]).flat_values
  row_ids = ragged.value_rowids()
  dense = tf.fill(tf.stack([rows, tf.cast(length, rows.dtype)]), tf.cast(value, ragged.dtype))
  return tf.tensor_scatter_nd_update(dense, tf.stack([row_ids, columns], axis=1),
                                     ragged.flat_values)


class TextPacker(tf.Module):
  """Strings -> (input_ids, segment_ids, input_mask) [B, max_seq_length], in the graph."""

  def __init__(self, tokenizer: InGraphTokenizer, max_seq_length: int):
    super().__init__(name="text_packer")
    self.tokenizer = tokenizer
    self.max_seq_length = max_seq_length
    ids = tokenizer.special_ids
    self.sep, self.cls, self.pad = ids.sep, ids.cls, max(ids.pad, 0)

  def _tokenize(self, texts):
    # Invalid UTF-8 becomes U+FFFD (as bytes.decode(errors="replace")) instead of failing.
    texts = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace")
    return tf.cast(self.tokenizer(texts), tf.int64)

  def __call__(self, text_a, text_b=None):
    ids_a = self._tokenize(text_a)
    batch = ids_a.nrows()
    def column(value):
      return tf.RaggedTensor.from_row_lengths(tf.fill([batch], tf.cast(value, tf.int64)),
                                              tf.ones([batch], tf.int64))
    if text_b is None:
      keep_a = tf.minimum(ids_a.row_lengths(), self.max_seq_length - 2)
      a = _prefix(ids_a, keep_a)
      tokens = tf.concat([a, column(self.sep), column(self.cls)], axis=1)
      segments = tf.concat([tf.ones_like(a) * SEG_A, column(SEG_A), column(SEG_CLS)], axis=1)
    else:
      ids_b = self._tokenize(text_b)
      keep_a, keep_b = _keep_lengths(ids_a.row_lengths(), ids_b.row_lengths(),
                                     self.max_seq_length - 3)
      a, b = _prefix(ids_a, keep_a), _prefix(ids_b, keep_b)
      tokens = tf.concat([a, column(self.sep), b, column(self.sep), column(self.cls)], axis=1)
      segments = tf.concat([tf.ones_like(a) * SEG_A, column(SEG_A), tf.ones_like(b) * SEG_B,
                            column(SEG_B), column(SEG_CLS)], axis=1)
    length = self.max_seq_length
    input_ids = tf.cast(_left_pad(tokens, length, self.pad), tf.int32)
    segment_ids = tf.cast(_left_pad(segments, length, SEG_PAD), tf.int32)
    input_mask = tf.cast(_left_pad(tf.ones_like(tokens), length, 0), tf.float32)
    return input_ids, segment_ids, input_mask


def _head_outputs(model, features):
  """The signature's outputs; floating ones in float32 whatever the model's compute dtype."""
  return {name: tf.cast(value, tf.float32) if value.dtype.is_floating else value
          for name, value in _compute_dtype_outputs(model, features).items()}


def _compute_dtype_outputs(model, features):
  if isinstance(model, XLNetQuestionAnswering):
    outputs = model(features, training=False)
    return {"start_top_index": outputs["start_top_index"],
            "start_top_log_probs": outputs["start_top_log_probs"],
            "end_top_index": outputs["end_top_index"],
            "end_top_log_probs": outputs["end_top_log_probs"],
            "answerability_score": -outputs["cls_logits"]}  # higher = more answerable
  if isinstance(model, (XLNetClassifier, XLNetMultipleChoice)):
    logits = model(features, training=False)
    if getattr(model, "num_classes", None) == 1:
      return {"score": logits}
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
            "predicted_label": tf.argmax(logits, axis=-1, output_type=tf.int32)}
  if isinstance(model, XLNetModel):
    sequence = model(features, training=False)["sequence_output"]
    return {"pooled_output": sequence[:, -1], "sequence_output": sequence}
  raise TypeError(f"Cannot export {type(model).__name__}: classifier, regression, multiple "
                  "choice, question answering or the backbone")


def export_saved_model(model, sp_path: str, export_base: str, model_name: str,
                       max_seq_length: int, version: int = 1, text_pairs: bool = False,
                       lower: bool = False, warmup_requests: int = 3, xla: bool = False) -> str:
  """Writes `<export_base>/<model_name>/<version>/` and returns that path.

  serving_default takes `text` (and `text_b` with text_pairs); a question-answering model takes
  `question` and `context`, packed `context <sep> question <sep> <cls>` as the SQuAD builder
  does, one window: a longer pair is truncated longest-first. Answer positions index the
  returned window. The graph computes in the model's dtype policy (a model built under
  mixed_bfloat16 serves in bfloat16, 1.6-1.7x float32's speed on an AVX512_BF16 CPU); the
  outputs are float32 either way.

  `xla=False` writes the model's compiled element-wise regions as plain ops, so any TF Serving
  runs the graph; with `xla=True` they stay XLA-compiled (faster on CPU), and the model server
  must be started with --xla_cpu_compilation_enabled=true (CPU only).
  """
  with contextlib.nullcontext() if xla else compiled.without_xla():
    return _export(model, sp_path, export_base, model_name, max_seq_length, version=version,
                   text_pairs=text_pairs, lower=lower, warmup_requests=warmup_requests)


def _export(model, sp_path, export_base, model_name, max_seq_length, *, version, text_pairs,
            lower, warmup_requests):
  tokenizer = InGraphTokenizer(sp_path, lower=lower)
  packer = TextPacker(tokenizer, max_seq_length)
  question_answering = isinstance(model, XLNetQuestionAnswering)

  def features_from(input_ids, segment_ids, input_mask):
    features = {"input_ids": input_ids, "segment_ids": segment_ids, "input_mask": input_mask}
    if question_answering:
      features["p_mask"] = tf.where(tf.equal(segment_ids, SEG_A), 0.0, 1.0)
      features["p_mask"] = tf.concat([features["p_mask"][:, :-1],
                                      tf.zeros_like(features["p_mask"][:, -1:])], axis=1)
      features["p_mask"] = tf.where(tf.equal(input_ids, packer.sep), 1.0, features["p_mask"])
      features["cls_index"] = tf.fill([tf.shape(input_ids)[0]], max_seq_length - 1)
    return _head_outputs(model, features)

  # One call builds every layer (Keras exports only built models).
  dummy = [1, 1, max_seq_length] if isinstance(model, XLNetMultipleChoice) else [1, max_seq_length]
  features_from(tf.zeros(dummy, tf.int32), tf.zeros(dummy, tf.int32), tf.ones(dummy))
  multiple_choice = isinstance(model, XLNetMultipleChoice)
  shape = [None, None, max_seq_length] if multiple_choice else [None, max_seq_length]
  ids_signature = [tf.TensorSpec(shape, tf.int32, "input_ids"),
                   tf.TensorSpec(shape, tf.int32, "segment_ids"),
                   tf.TensorSpec(shape, tf.float32, "input_mask")]
  archive = keras.export.ExportArchive()
  archive.track(model)
  archive.track(packer)
  archive.add_endpoint("serve_ids", features_from, input_signature=ids_signature)
  if multiple_choice:
    def serve_text(text, options):
      # Each option is packed with the text: [B, C] pairs -> [B, C, T].
      count = tf.shape(options)[1]
      flat = packer(tf.repeat(text, count), tf.reshape(options, [-1]))
      return features_from(*[tf.reshape(t, tf.stack([-1, count, max_seq_length]))
                             for t in flat])
    text_signature = [tf.TensorSpec([None], tf.string, "text"),
                      tf.TensorSpec([None, None], tf.string, "options")]
  elif question_answering:
    def serve_text(question, context):
      return features_from(*packer(context, question))
    text_signature = [tf.TensorSpec([None], tf.string, "question"),
                      tf.TensorSpec([None], tf.string, "context")]
  elif text_pairs:
    def serve_text(text, text_b):
      return features_from(*packer(text, text_b))
    text_signature = [tf.TensorSpec([None], tf.string, "text"),
                      tf.TensorSpec([None], tf.string, "text_b")]
  else:
    def serve_text(text):
      return features_from(*packer(text))
    text_signature = [tf.TensorSpec([None], tf.string, "text")]
  archive.add_endpoint("serving_default", serve_text, input_signature=text_signature)
  path = os.path.join(export_base, model_name, str(version))
  if os.path.exists(path):
    shutil.rmtree(path)
  archive.write_out(path, verbose=False)
  assets = os.path.join(path, "assets")
  os.makedirs(assets, exist_ok=True)
  shutil.copy(sp_path, os.path.join(assets, os.path.basename(sp_path)))
  if warmup_requests:
    names = [spec.name for spec in text_signature]
    examples = {name: ["A warm-up request for the model server."] * 2 for name in names}
    if multiple_choice:
      examples["options"] = [["one option", "another option"]] * 2
    write_warmup_requests(path, model_name, "serving_default", examples, warmup_requests)
  return path


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
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, WARMUP_FILE)
  with tf.io.TFRecordWriter(path) as writer:
    for _ in range(count):
      writer.write(prediction_log(model_name, signature, inputs))
  return path
