"""Checks a SavedModel export as a model server meets it: loaded in a fresh process that
imports only tensorflow and tensorflow_text (no xlnet_tf), each signature run on a check batch
there, its outputs compared with the Keras model's in this process.

TensorFlow's `saved_model_cli run` cannot do it: it loads no op library, so the graph's
SentencePiece op (tensorflow-text's SentencepieceOp) is "not registered" there. TF Serving's
model server links the tensorflow-text ops in; `tf.saved_model.load` needs `import
tensorflow_text` first.

The check batch: serve_ids gets saved_model.verification_inputs (3 rows, left padding, segments
A / B / <cls>); the text signature gets CHECK_TEXTS (an empty text, accents, quotes, a text past
the sequence length), packed here by an XLNetPreprocessor over the export's tokenizer.
"""

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from xlnet_tf.modeling.ops import compile as compile_ops
from xlnet_tf.modeling.ops.int8_packing import constant_int8_weights
from xlnet_tf.serving.saved_model import ids_serving_function, verification_inputs
from xlnet_tf.text.preprocessor import XLNetPreprocessor
from xlnet_tf.utils.errors import UserInputError

# The largest |served - Keras| of a floating value, relative to its magnitude (at least 1; a
# QA head's masked log-probabilities are -1e30): the same graph in two processes differs by
# rounding only.
TOLERANCE = 1e-4
TIMEOUT_SECONDS = 600
SIGNATURES = ("serving_default", "serve_ids")  # what every export of saved_model.py has
# One text of each kind the in-graph preprocessing treats specially, and one past any length.
CHECK_TEXTS = ("The check reads this sentence through the exported tokenizer.", "",
               "Café naïve 2000, ``quoted'' text", "long text " * 300)
CHECK_SECOND_TEXTS = ("Its second text.", "a second text after an empty one", "", "short")
CHECK_OPTIONS = (("one option", "another option"),) * len(CHECK_TEXTS)

# The fresh process: loads the SavedModel, says its signatures' inputs, runs the requests it
# is sent, says their outputs (strings decoded). One JSON line each way; errors as one line.
_LOADER = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the SentencePiece op, as TF Serving's model server has it

def say(kind, value):
  print(kind + " " + json.dumps(value), flush=True)

def first_line(error):
  lines = [line.strip() for line in str(error).splitlines() if line.strip()]
  return f"{type(error).__name__}: {lines[0] if lines else ''}"[:400]

def plain(value):
  if isinstance(value, list):
    return [plain(item) for item in value]
  return value.decode("utf-8", "replace") if isinstance(value, bytes) else value

try:
  loaded = tf.saved_model.load(sys.argv[1])
  signatures = {name: {key: [spec.dtype.name, spec.shape.as_list()]
                       for key, spec in function.structured_input_signature[1].items()}
                for name, function in loaded.signatures.items()}
except Exception as error:
  say("ERROR", ["load", first_line(error)])
  sys.exit(0)
say("SIGNATURES", signatures)
outputs = {}
for name, inputs in json.loads(sys.stdin.readline()).items():
  specs = loaded.signatures[name].structured_input_signature[1]
  try:
    result = loaded.signatures[name](**{key: tf.constant(value, specs[key].dtype)
                                        for key, value in inputs.items()})
  except Exception as error:
    say("ERROR", [name, first_line(error)])
    sys.exit(0)
  outputs[name] = {key: [value.dtype.name, plain(value.numpy().tolist())]
                   for key, value in result.items()}
say("OUTPUTS", outputs)
"""


class SavedModelCheckError(UserInputError):
  """The export does not load, or does not serve what the Keras model computes: one line."""


def check_saved_model(path: str, model, tokenizer, labels: Optional[Sequence[str]] = None,
                      xla: bool = False, shown: Optional[str] = None) -> List[str]:
  """Checks a SavedModel as a model server meets it, against the Keras model it came from.

  Loads the SavedModel at `path` in a fresh process (tensorflow + tensorflow_text only), runs
  each of its signatures on the check batch there (module docstring) and compares the outputs
  with `model`'s here, traced as the export traces it (`xla`; a quantized model's int8
  kernels as constants).

  Args:
    path: the SavedModel's version directory.
    model: the Keras model exported (an XLNetModel or head).
    tokenizer: the XLNetTokenizer of the export (its settings), which packs the check texts.
    labels: the labels exported with it, whose names the signatures return; None if none.
    xla: whether the export kept XLA's compiled regions (export_saved_model's `xla`).
    shown: how the messages name the export (default: `path`).

  Returns:
    One line per signature, saying what was compared and how closely it agreed.

  Raises:
    SavedModelCheckError: (one line naming `shown`) when the export does not load, lacks a
      signature, or an output differs (floating: by more than TOLERANCE of max(1, |value|);
      integers and strings: at all).
  """
  shown = shown or path
  with _ServingProcess(path, shown) as process:
    signatures = process.signatures()
    missing = [name for name in SIGNATURES if name not in signatures]
    if missing:
      raise SavedModelCheckError(f"{shown}: no {missing[0]} signature (an xlnet_tf export has "
                                 f"{' and '.join(SIGNATURES)}; it has "
                                 f"{sorted(signatures) or 'none'})")
    # The packed length T: the last dimension of serve_ids' inputs ([B, T], [B, S, T], ...).
    sequence_length = signatures["serve_ids"]["input_ids"][1][-1]
    requests = {name: _check_inputs(model, inputs, sequence_length)
                for name, inputs in signatures.items()}
    process.send(requests)
    # Computed while the process serves the requests.
    expected = _keras_outputs(model, tokenizer, labels, xla, requests, signatures,
                              sequence_length)
    served = process.outputs()
  return [_compared(shown, name, requests[name], served[name], expected[name])
          for name in sorted(requests)]


class _ServingProcess:
  """The fresh process of _LOADER on one SavedModel, its stderr in a temporary file (shown
  when it ends unexpectedly); killed after TIMEOUT_SECONDS."""

  def __init__(self, path: str, shown: str):
    self.path, self.shown = path, shown

  def __enter__(self):
    self._log = tempfile.TemporaryFile("w+")
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    self._process = subprocess.Popen([sys.executable, "-c", _LOADER, self.path],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log, text=True, env=environment)
    self._watchdog = threading.Timer(TIMEOUT_SECONDS, self._process.kill)
    self._watchdog.start()
    return self

  def __exit__(self, *error):
    self._watchdog.cancel()
    if self._process.poll() is None:
      self._process.kill()
    self._process.wait()
    self._log.close()

  def signatures(self) -> Dict[str, Dict[str, list]]:
    return self._reply("SIGNATURES")

  def send(self, requests) -> None:
    """Asks the process to run {signature: {input: values}}."""
    self._process.stdin.write(json.dumps(requests) + "\n")
    self._process.stdin.flush()

  def outputs(self) -> Dict[str, Dict[str, list]]:
    """{signature: {output: [dtype, values]}} of the requests sent."""
    return self._reply("OUTPUTS")

  def _reply(self, kind: str):
    for line in self._process.stdout:
      if line.startswith("ERROR "):
        where, message = json.loads(line[len("ERROR "):])
        if where == "load":
          raise SavedModelCheckError(f"{self.shown}: does not load in a fresh process with "
                                     f"tensorflow and tensorflow_text ({message})")
        raise SavedModelCheckError(f"{self.shown}: {where} fails on the check batch "
                                   f"({message})")
      if line.startswith(kind + " "):
        return json.loads(line[len(kind) + 1:])
    self._log.seek(0)
    lines = [line.strip() for line in self._log.read().splitlines() if line.strip()]
    raise SavedModelCheckError(f"{self.shown}: the process loading it ended (exit status "
                               f"{self._process.wait()}) before it said its {kind.lower()}"
                               + (f": {lines[-1][:300]}" if lines else ""))


def _takes_texts(specs: Dict[str, list]) -> bool:
  """Whether a signature of these inputs ({name: [dtype, shape]}) takes strings."""
  return all(dtype == "string" for dtype, _ in specs.values())


def _check_inputs(model, specs: Dict[str, list], sequence_length: int) -> Dict[str, list]:
  """The check batch for a signature of these inputs: texts by their names, or the ids of
  verification_inputs."""
  # In a fixed order (the process lists them in any), for the lines that name them.
  if _takes_texts(specs):
    texts = {"text": CHECK_TEXTS, "text_b": CHECK_SECOND_TEXTS, "question": CHECK_SECOND_TEXTS,
             "context": CHECK_TEXTS, "options": CHECK_OPTIONS}
    return {name: [list(row) if isinstance(row, tuple) else row for row in rows]
            for name, rows in texts.items() if name in specs}
  ids = verification_inputs(model, sequence_length)
  return {name: values.tolist() for name, values in ids.items() if name in specs}


def _keras_outputs(model, tokenizer, labels, xla: bool, requests, signatures,
                   sequence_length: int):
  """{signature: {output: NumPy array}} of `model` on the requests, traced as the export is
  (texts packed by a preprocessor over `tokenizer`)."""
  preprocessor = XLNetPreprocessor(tokenizer, sequence_length,
                                   num_segments=getattr(model, "max_segments", 1))
  features_from = ids_serving_function(model, tokenizer.special_ids.sep, labels)
  quantized = getattr(model, "quantization", None) and not xla
  outputs = {}
  with contextlib.nullcontext() if xla else compile_ops.without_xla(), \
      constant_int8_weights() if quantized else contextlib.nullcontext():
    serve = tf.function(features_from, reduce_retracing=True)  # traced inside these settings
    for name, inputs in requests.items():
      if _takes_texts(signatures[name]):
        features = preprocessor({key: tf.constant(value) for key, value in inputs.items()})
      else:
        features = {key: tf.constant(value, tf.float32 if key == "input_mask" else tf.int32)
                    for key, value in inputs.items()}
      result = serve(features["input_ids"], features["segment_ids"], features["input_mask"])
      outputs[name] = {key: value.numpy() for key, value in result.items()}
  return outputs


def _compared(shown: str, name: str, inputs, served, expected) -> str:
  """One line on signature `name`, or SavedModelCheckError naming the first output that
  differs."""
  if sorted(served) != sorted(expected):
    raise SavedModelCheckError(f"{shown}: {name} returns {sorted(served)}; the Keras model "
                               f"{sorted(expected)}")
  largest = 0.0
  for key in sorted(expected):
    ours = expected[key]
    theirs = np.asarray(served[key][1], dtype=object if ours.dtype.kind in "OSU" else None)
    if ours.dtype.kind in "OSU":
      ours = np.vectorize(lambda value: value.decode("utf-8", "replace")
                          if isinstance(value, bytes) else value, otypes=[object])(ours)
    if theirs.shape != ours.shape:
      raise SavedModelCheckError(f"{shown}: {name} output {key} has shape "
                                 f"{list(theirs.shape)}; the Keras model's {list(ours.shape)}")
    if ours.dtype.kind == "f":
      ours = ours.astype(np.float64)
      scaled = np.abs(theirs.astype(np.float64) - ours) / np.maximum(1.0, np.abs(ours))
      difference = float(np.max(scaled, initial=0.0))
      if not difference <= TOLERANCE:  # NaN included
        raise SavedModelCheckError(f"{shown}: {name} output {key} differs from the Keras "
                                   f"model's by {difference:.3g} (the largest |difference| / "
                                   f"max(1, |value|); tolerance {TOLERANCE:g})")
      largest = max(largest, difference)
    else:
      unequal = int(np.sum(theirs != ours))
      if unequal:
        raise SavedModelCheckError(f"{shown}: {name} output {key} differs from the Keras "
                                   f"model's in {unequal} of {ours.size} values")
  rows = len(next(iter(inputs.values())))
  return (f"{name} ({', '.join(inputs)}): {', '.join(sorted(expected))} match the Keras model "
          f"on {rows} check rows (largest difference {largest:.2g})")
