"""ONNX and LiteRT files of the ids signature: the same outputs as the Keras model (batch 4,
left padding, segments A / B / <cls>) under ONNX Runtime and the LiteRT interpreter, nothing
left behind by a failed check, and run/export.py --format's bad inputs in one line.

ONNX needs the `[export]` extra (tf2onnx, onnxruntime): those tests skip without it. LiteRT needs
only TensorFlow.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from cli_output import run_tool
from model_inputs import padded_pair_batch
from xlnet_reference import randomize_weights
from xlnet_tf import (XLNetClassifier, XLNetConfig, XLNetModel, XLNetMultipleChoice,
                      XLNetQuestionAnswering, XLNetTokenClassifier, checkpoints)
from xlnet_tf.serving import onnx_litert
from xlnet_tf.checkpoints.labels import save_labels
from xlnet_tf.serving.saved_model import ids_serving_function
from xlnet_tf.utils import files
from xlnet_tf.utils.errors import UserInputError

CONFIG = XLNetConfig.preset("tiny", dropout=0.0, dropatt=0.0)  # n_token 1000: the test vocabulary
LENGTH = 16
SEP_ID = 4  # XLNet's <sep>: the question-answering head's p_mask reads it
HEADS = {
    "backbone": lambda backbone: backbone,
    "classifier": lambda backbone: XLNetClassifier(backbone, num_classes=3),
    "regression": lambda backbone: XLNetClassifier(backbone, num_classes=1,
                                                   summary_type="mean"),
    "multiple_choice": lambda backbone: XLNetMultipleChoice(backbone),
    "question_answering": lambda backbone: XLNetQuestionAnswering(backbone, start_n_top=3,
                                                                  end_n_top=2),
    "token_classifier": lambda backbone: XLNetTokenClassifier(backbone, num_labels=5),
}


def build(kind, seed=0):
  model = HEADS[kind](XLNetModel(CONFIG))
  randomize_weights(model, seed)
  return model


def checked_inputs(kind, rng):
  """Batch 4 (2 x 2 options for multiple choice; the file's own check used 3), left padding,
  three segment ids."""
  if kind == "multiple_choice":
    flat = padded_pair_batch(rng, 4, LENGTH, CONFIG.n_token, pad_lengths=[0, 5, 2, 7])
    return {key: value.reshape(2, 2, LENGTH) for key, value in flat.items()}
  return padded_pair_batch(rng, 4, LENGTH, CONFIG.n_token, pad_lengths=[0, 5, 2, 9])


def needs(export_format):
  if export_format == "onnx":
    pytest.importorskip("tf2onnx")
    pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("export_format", ["onnx", "litert"])
@pytest.mark.parametrize("kind", sorted(HEADS))
def test_exported_file_computes_what_the_keras_model_does(tmp_path, rng, export_format, kind):
  needs(export_format)
  model = build(kind)
  path, difference = onnx_litert.export_file(model, export_format, str(tmp_path / "1"),
                                                LENGTH, SEP_ID)
  assert path == str(tmp_path / "1" / onnx_litert.FILE_NAMES[export_format])
  assert difference < 1e-5
  inputs = checked_inputs(kind, rng)
  expected = ids_serving_function(model, SEP_ID)(
      *(tf.constant(inputs[name]) for name in ("input_ids", "segment_ids", "input_mask")))
  actual = onnx_litert.RUNNERS[export_format](path, inputs)
  assert sorted(actual) == sorted(expected)
  for name, value in expected.items():
    value = value.numpy()
    assert actual[name].shape == value.shape, name
    if value.dtype.kind == "f":
      np.testing.assert_allclose(actual[name], value, atol=1e-5, rtol=0, err_msg=name)
    else:
      np.testing.assert_array_equal(actual[name], value, err_msg=name)


def test_onnx_file_holds_the_weights_as_initializers_and_takes_the_signature_alone(tmp_path):
  """write_onnx converts with the weights as inputs (small graphs for tf2onnx), then stores
  them: the file's inputs are the ids signature's, every weight a node reads is an initializer
  of its value, none is left unread."""
  needs("onnx")
  import onnx
  from onnx import numpy_helper
  model = build("classifier")
  path = onnx_litert.write_onnx(model, str(tmp_path / "model.onnx"), LENGTH, SEP_ID)
  graph = onnx.load(path).graph
  assert [graph_input.name for graph_input in graph.input] == ["input_ids", "segment_ids",
                                                               "input_mask"]
  stored = {initializer.name: numpy_helper.to_array(initializer)
            for initializer in graph.initializer}
  weights = [name for name in stored if name.startswith(onnx_litert.WEIGHT_INPUT)]
  # All but mask_emb, which only the pretraining objective's query stream reads.
  assert len(weights) == len(model.weights) - 1
  read = {name for node in graph.node for name in node.input}
  assert set(weights) <= read
  embedding = model.backbone.word_embedding.numpy()
  assert any(value.shape == embedding.shape and np.array_equal(value, embedding)
             for value in stored.values())


def test_a_failed_check_leaves_nothing(tmp_path, monkeypatch):
  def not_the_model(path, inputs):
    return {name: np.full([3, 3], np.nan, np.float32)
            for name in ("logits", "probabilities", "predicted_label")}
  monkeypatch.setitem(onnx_litert.RUNNERS, "litert", not_the_model)
  (tmp_path / "serving").mkdir()
  with pytest.raises(RuntimeError, match="differ from the Keras model by nan"):
    onnx_litert.export_file(build("classifier"), "litert", str(tmp_path / "serving" / "1"),
                               LENGTH, SEP_ID)
  assert os.listdir(tmp_path / "serving") == []


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
  directory = tmp_path_factory.mktemp("classifier")
  checkpoints.save_pretrained(build("classifier"), str(directory))
  save_labels(str(directory), ["neg", "neutral", "pos"])
  return directory


def test_export_cli_writes_a_litert_file_with_its_vocabulary_and_labels(tmp_path, sp_model,
                                                                        classifier_dir):
  """Into an export base whose name holds a space and non-ASCII letters."""
  base = tmp_path / "modèles servis ü"
  result = run_tool("run/export.py", f"--model_dir={classifier_dir}", f"--sp_path={sp_model}",
                    f"--export_base={base}", "--model_name=sst", "--format=litert",
                    f"--max_seq_length={LENGTH}")
  assert result.returncode == 0, result.stderr
  directory = base / "sst" / "1"
  assert sorted(os.listdir(directory)) == ["labels.json", "model.tflite",
                                           os.path.basename(sp_model)]
  assert result.stdout.startswith(f"Wrote {directory / 'model.tflite'}; max |difference|")
  assert json.loads((directory / "labels.json").read_text()) == ["neg", "neutral", "pos"]


BAD_FLAGS = {
    # case: (flags, the one error line)
    "xla": (["--format=onnx", "--xla"], "error: --xla must be False with --format=onnx (the file "
            "holds the float32 ids signature, without XLA or a tokenizer); got True"),
    "bfloat16": (["--format=litert", "--dtype=bfloat16"], "error: --dtype must be float32 with "
                 "--format=litert (the file holds the float32 ids signature, without XLA or a "
                 "tokenizer); got bfloat16"),
    "text pairs": (["--format=onnx", "--text_pairs"], "error: --text_pairs must be False with "
                   "--format=onnx (the file holds the float32 ids signature, without XLA or a "
                   "tokenizer); got True"),
    "int8 litert": (["--format=litert", "--quantize=int8"], "error: --quantize must be none with "
                    "--format=litert (int8: --format=savedmodel or onnx); got int8"),
    "int8 bfloat16": (["--quantize=int8", "--dtype=bfloat16"], "error: --dtype must be float32 "
                      "with --quantize=int8 (int8 weights, float32 activations); got bfloat16"),
}


@pytest.mark.parametrize("case", sorted(BAD_FLAGS))
def test_export_cli_refuses_flags_a_file_cannot_hold(tmp_path, sp_model, classifier_dir, case):
  flags, message = BAD_FLAGS[case]
  result = run_tool("run/export.py", f"--model_dir={classifier_dir}", f"--sp_path={sp_model}",
                    f"--export_base={tmp_path / 'serving'}", *flags)
  assert result.returncode == 1, result.stderr
  assert [line for line in result.stderr.splitlines() if line.strip()] == [message]
  assert not (tmp_path / "serving").exists()


def test_a_remote_directory_gets_the_checked_files(tmp_path, monkeypatch, sp_model):
  """export_file into ram:// (as gs://): staged in the local temporary directory, copied when
  checked, the model file last (the conversion and its check stand in here: the tests above
  run them); an existing remote version is refused, even with overwrite, and left as it was;
  nothing is made in the working directory, and the staging folder is gone."""
  monkeypatch.chdir(tmp_path)
  monkeypatch.setattr(onnx_litert.tempfile, "tempdir", str(tmp_path / "temporary"))
  (tmp_path / "temporary").mkdir()
  monkeypatch.setitem(onnx_litert.WRITERS, "litert",
                      lambda model, path, length, sep_id: files.write_bytes(path, b"flatbuffer"))
  monkeypatch.setattr(onnx_litert, "max_difference", lambda *arguments: 0.0)
  base = f"ram://onnx-litert-{os.getpid()}/serving"
  files.makedirs(f"{base}/1")
  files.write_text(f"{base}/1/old.txt", "an earlier export")
  for overwrite in (False, True):
    with pytest.raises(UserInputError, match=rf"^{base}/1: version 1 exists"):
      onnx_litert.export_file(build("classifier"), "litert", f"{base}/1", LENGTH, SEP_ID,
                              overwrite=overwrite)
  assert files.listdir(f"{base}/1") == ["old.txt"]
  copied = []
  copy = files.copy
  monkeypatch.setattr(files, "copy", lambda source, target: copied.append(target) or copy(
      source, target))
  path, _ = onnx_litert.export_file(build("classifier"), "litert", f"{base}/2", LENGTH, SEP_ID,
                                    sp_path=sp_model, labels=["a", "b", "c"])
  assert path == f"{base}/2/model.tflite" and files.read_bytes(path) == b"flatbuffer"
  assert sorted(files.listdir(f"{base}/2")) == ["labels.json", "model.tflite", "spiece.model"]
  assert copied[-1] == path
  assert os.listdir(tmp_path) == ["temporary"] and os.listdir(tmp_path / "temporary") == []
