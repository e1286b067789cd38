"""SavedModels for TF Serving, loaded in a process that imports only tensorflow and
tensorflow_text (what TF Serving has), compared with the Keras models."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from xlnet_reference import randomize_weights
from xlnet_tf import XLNetConfig, XLNetModel, XLNetPretrainer, XLNetTokenClassifier, checkpoints
from xlnet_tf.tasks.classification import encode_examples
from xlnet_tf.tasks.classification.readers import TextExample
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.serving import saved_model
from xlnet_tf.utils import whole_directories
from xlnet_tf.serving.saved_model import (LONG_DOCUMENTS_FILE, WARMUP_FILE, export_saved_model,
                                          load_exportable_model)
from xlnet_tf.serving.saved_model_check import check_saved_model
from xlnet_tf.modeling.ops.int8_packing import onednn_available, row_top
from xlnet_tf.utils.relative_error import relative_error
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.heads.classifier import XLNetClassifier
from xlnet_tf.heads.question_answering import XLNetQuestionAnswering
from repository import README

TEXTS = ["The class statement defines a new class, with methods and values " * 3,
         "", "Café naïve 2000, ``quoted''", "   ", "中文 emoji 😀"]
PAIRS = ["short", "a b c d e f g h i j k l m n o p q r s t", "", "x", "The end."]
LENGTH = 24

# One process for the module's requests (a TensorFlow import each would cost more than the
# requests): a JSON line [path, requests] in, a line "OUTPUT {outputs | error}" out.
LOADER = """
import json, sys, traceback
import numpy as np
import tensorflow as tf
import tensorflow_text  # registers SentencepieceOp, as TF Serving's model server does
assert "xlnet_tf" not in sys.modules
models = {}

def plain(value):  # strings (label names) as text
  if isinstance(value, list):
    return [plain(item) for item in value]
  return value.decode() if isinstance(value, bytes) else value

for line in sys.stdin:
  path, requests = json.loads(line)
  try:
    if path not in models:
      models[path] = tf.saved_model.load(path)
    loaded = models[path]
    out = {}
    for name, (signature, inputs) in requests.items():
      tensors = {k: tf.constant(v, dtype=tf.string if np.asarray(v).dtype.kind in "US" else
                                (tf.float32 if k == "input_mask" else tf.int32))
                 for k, v in inputs.items()}
      result = loaded.signatures[signature](**tensors)
      out[name] = {k: plain(v.numpy().tolist()) for k, v in result.items()}
    reply = {"outputs": out}
  except Exception:
    reply = {"error": traceback.format_exc()}
  print("OUTPUT " + json.dumps(reply), flush=True)
"""


class ServingProcess:
  """A process that imports only tensorflow and tensorflow_text and runs signatures of
  SavedModels: serve(path, {name: (signature, inputs)}) -> {name: outputs}."""

  def __init__(self, log_path):
    self._log = open(log_path, "w+")
    self._process = subprocess.Popen([sys.executable, "-c", LOADER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log, text=True)

  def serve(self, path, requests):
    self._process.stdin.write(json.dumps([path, requests]) + "\n")
    self._process.stdin.flush()
    watchdog = threading.Timer(300, self._process.kill)
    watchdog.start()
    try:
      line = self._process.stdout.readline()
      while line and not line.startswith("OUTPUT "):
        line = self._process.stdout.readline()
    finally:
      watchdog.cancel()
    self._log.seek(0)
    assert line, self._log.read()[-3000:]  # the process ended: its stderr
    reply = json.loads(line[len("OUTPUT "):])
    assert "error" not in reply, reply.get("error", "")[-3000:]
    return reply["outputs"]

  def close(self):
    self._process.kill()  # a TensorFlow process can take seconds to exit on its own
    self._process.wait()
    self._log.close()


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
  process = ServingProcess(str(tmp_path_factory.mktemp("serving") / "stderr.txt"))
  yield process.serve
  process.close()


@pytest.fixture(scope="module")
def tokenizer(sp_model):
  return XLNetTokenizer(sp_model)


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp("exports"))


@pytest.fixture(scope="module")
def backbone_exports(sp_model, tokenizer, export_dir):
  """A float32 backbone with random weights, exported plain and with xla=True."""
  config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size, dropout=0.0, dropatt=0.0)
  backbone = XLNetModel(config)
  randomize_weights(backbone, 5)
  plain = export_saved_model(backbone, sp_model, export_dir, "plain", LENGTH)
  with_xla = export_saved_model(backbone, sp_model, export_dir, "xla", LENGTH, xla=True)
  return backbone, plain, with_xla


@pytest.fixture(scope="module")
def pair_classifier_export(sp_model, tokenizer, export_dir):
  """A two-label classifier of text pairs with random weights and the README's label names,
  and the path of its export."""
  config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size, dropout=0.0, dropatt=0.0)
  model = XLNetClassifier(XLNetModel(config), 2)
  randomize_weights(model, 0)
  return model, export_saved_model(model, sp_model, export_dir, "clf", LENGTH, text_pairs=True,
                                   labels=["not_equivalent", "equivalent"])


LABELS = ["negative", "positive"]


@pytest.fixture(scope="module")
def two_label_export(sp_model, tokenizer, export_dir):
  """A classifier of one text with two named labels: the path of its export."""
  config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size)
  return export_saved_model(XLNetClassifier(XLNetModel(config), 2), sp_model, export_dir, "m",
                            LENGTH, labels=LABELS)


def test_classifier_strings_and_ids_match_keras(sp_model, tokenizer, serve,
                                                pair_classifier_export):
  model, path = pair_classifier_export
  assert path.endswith(os.path.join("clf", "1"))
  assert os.path.exists(os.path.join(path, "assets", os.path.basename(sp_model)))
  assert tf.data.TFRecordDataset(os.path.join(path, "assets.extra", WARMUP_FILE)).reduce(
      0, lambda n, _: n + 1).numpy() == 3
  features = encode_examples(tokenizer, [TextExample(a, b, None, "") for a, b in
                                         zip(TEXTS, PAIRS)], LENGTH)
  expected = model(features).numpy()
  outputs = serve(path, {
      "strings": ("serving_default", {"text": TEXTS, "text_b": PAIRS}),
      "ids": ("serve_ids", {k: features[k].tolist() for k in features}),
      "one": ("serving_default", {"text": TEXTS[:1], "text_b": PAIRS[:1]})})
  np.testing.assert_allclose(outputs["strings"]["logits"], expected, atol=1e-5)
  np.testing.assert_allclose(outputs["ids"]["logits"], expected, atol=1e-5)
  np.testing.assert_allclose(outputs["one"]["logits"], expected[:1], atol=1e-5)
  assert outputs["strings"]["predicted_label"] == expected.argmax(-1).tolist()
  np.testing.assert_allclose(np.sum(outputs["strings"]["probabilities"], -1), 1.0, atol=1e-5)


def test_regression_backbone_and_qa_heads(sp_model, tokenizer, tmp_path, serve,
                                          backbone_exports):
  config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size, dropout=0.0, dropatt=0.0)
  regression = XLNetClassifier(XLNetModel(config), 1)
  backbone, paths = backbone_exports[0], {"backbone": backbone_exports[1]}
  qa = XLNetQuestionAnswering(XLNetModel(config), start_n_top=3, end_n_top=2)
  paths.update({name: export_saved_model(model, sp_model, str(tmp_path), name, LENGTH)
                for name, model in (("reg", regression), ("qa", qa))})
  features = encode_examples(tokenizer, [TextExample(t, None, None, "") for t in TEXTS], LENGTH)
  score = serve(paths["reg"], {"r": ("serving_default", {"text": TEXTS})})["r"]["score"]
  np.testing.assert_allclose(score, regression(features).numpy(), atol=1e-5)
  out = serve(paths["backbone"], {"b": ("serving_default", {"text": TEXTS})})["b"]
  sequence = backbone(features)["sequence_output"].numpy()
  np.testing.assert_allclose(out["sequence_output"], sequence, atol=1e-5)
  np.testing.assert_allclose(out["pooled_output"], sequence[:, -1], atol=1e-5)
  answers = serve(paths["qa"], {"q": ("serving_default", {"question": ["What is it?"] * 2,
                                                            "context": TEXTS[:2]})})["q"]
  assert np.asarray(answers["end_top_index"]).shape == (2, 3, 2)
  assert np.asarray(answers["answerability_score"]).shape == (2,)
  # Starts with any probability fall on context pieces (segment 0, not <sep>) or on <cls>
  # (the last position); an empty context leaves only <cls>, the rest of its top-k is masked.
  context = encode_examples(tokenizer, [TextExample(c, "What is it?", None, "")
                                        for c in TEXTS[:2]], LENGTH)
  for row, (starts, log_probs) in enumerate(zip(answers["start_top_index"],
                                                answers["start_top_log_probs"])):
    for start, log_prob in zip(starts, log_probs):
      if log_prob > -1e20:
        assert start == LENGTH - 1 or (
            context["segment_ids"][row, start] == 0
            and context["input_ids"][row, start] != tokenizer.special_ids.sep)
  assert answers["start_top_index"][1][0] == LENGTH - 1  # empty context: "no answer" first


def test_token_classifier_exports_and_the_pretrainer_is_refused(sp_model, tokenizer, tmp_path,
                                                                serve):
  config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size, dropout=0.0, dropatt=0.0)
  tagger = XLNetTokenClassifier(XLNetModel(config), 3)
  path = export_saved_model(tagger, sp_model, str(tmp_path), "tagger", LENGTH,
                            labels=["O", "B-KW", "I-KW"])
  assert json.load(open(os.path.join(path, "assets", "labels.json"))) == ["O", "B-KW", "I-KW"]
  features = encode_examples(tokenizer, [TextExample(t, None, None, "") for t in TEXTS], LENGTH)
  out = serve(path, {"t": ("serving_default", {"text": TEXTS})})["t"]
  logits = tagger(features).numpy()
  np.testing.assert_allclose(out["logits"], logits, atol=1e-5)
  np.testing.assert_array_equal(out["predicted_labels"], logits.argmax(-1))
  # Each position's label by name too.
  np.testing.assert_array_equal(out["predicted_label_names"],
                                np.array(["O", "B-KW", "I-KW"])[logits.argmax(-1)])
  with pytest.raises(TypeError, match="XLNetPretrainer: it has no serving_outputs"):
    export_saved_model(XLNetPretrainer(XLNetModel(config)), sp_model, str(tmp_path), "lm",
                       LENGTH)


def test_saved_model_cli_show_and_run(two_label_export):
  path = two_label_export
  shown = subprocess.run(["saved_model_cli", "show", "--dir", path, "--all"],
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PATH=os.path.dirname(sys.executable) + ":" +
                                  os.environ["PATH"]))
  assert shown.returncode == 0, shown.stderr[-2000:]
  assert "serving_default" in shown.stdout and "serve_ids" in shown.stdout
  assert "predicted_label" in shown.stdout
  run = subprocess.run(
      [sys.executable, "-c", "import sys, tensorflow_text; from tensorflow.python.tools import "
       "saved_model_cli; sys.argv = ['saved_model_cli'] + sys.argv[1:]; saved_model_cli.main()",
       "run", "--dir", path, "--tag_set", "serve", "--signature_def", "serving_default",
       "--input_exprs", "text=['hello world', '']"],
      capture_output=True, text=True, timeout=300)
  assert run.returncode == 0, run.stderr[-2000:]
  assert "predicted_label" in run.stdout and "predicted_label_name" in run.stdout


def test_a_classifier_with_labels_serves_their_names(tokenizer, serve, two_label_export):
  features = encode_examples(tokenizer, [TextExample(t, None, None, "") for t in TEXTS], LENGTH)
  outputs = serve(two_label_export, {
      "strings": ("serving_default", {"text": TEXTS}),
      "ids": ("serve_ids", {k: features[k].tolist() for k in features})})
  for out in outputs.values():
    assert out["predicted_label_name"] == [LABELS[i] for i in out["predicted_label"]]
  assert set(outputs["strings"]["predicted_label_name"]) <= set(LABELS)


def _readme_json(marker):
  text = open(README, encoding="utf-8").read()
  block = re.search(re.escape(marker) + r"\s*```json\n(.*?)```", text, re.S)
  return json.loads(block.group(1))


def test_readme_rest_request_gives_the_documented_response(serve, pair_classifier_export):
  request, response = _readme_json("<!-- rest-request -->"), _readme_json("<!-- rest-response -->")
  path = pair_classifier_export[1]
  columns = {key: [instance[key] for instance in request["instances"]]
             for key in request["instances"][0]}
  out = serve(path, {"r": (request["signature_name"], columns)})["r"]
  documented = response["predictions"]
  assert len(out["logits"]) == len(documented) == len(request["instances"])
  assert set(out) == set(documented[0])
  for key in documented[0]:
    assert np.shape(out[key][0]) == np.shape(documented[0][key])


def test_bad_requests(two_label_export):
  loaded = tf.saved_model.load(two_label_export)
  serving = loaded.signatures["serving_default"]
  # Empty, non-UTF-8 and over-long texts give defined results.
  out = serving(text=tf.constant([b"", b"bad \xff\xfe bytes", b"word " * 1000]))
  assert out["logits"].shape == (3, 2) and np.isfinite(out["logits"].numpy()).all()
  replaced = serving(text=tf.constant(["bad \ufffd\ufffd bytes"]))["logits"].numpy()
  np.testing.assert_allclose(out["logits"].numpy()[1], replaced[0], atol=1e-5)
  with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError)):
    serving(text=tf.constant([1, 2]))
  with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError)):
    loaded.signatures["serve_ids"](input_ids=tf.zeros([1, LENGTH], tf.float32),
                                   segment_ids=tf.zeros([1, LENGTH], tf.int32),
                                   input_mask=tf.ones([1, LENGTH]))


def test_multiple_choice_options_in_the_graph(sp_model, tokenizer, tmp_path, serve):
  from xlnet_tf.heads.multiple_choice import XLNetMultipleChoice
  config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size, dropout=0.0, dropatt=0.0)
  model = XLNetMultipleChoice(XLNetModel(config))
  randomize_weights(model, 2)
  path = export_saved_model(model, sp_model, str(tmp_path), "race", LENGTH)
  articles = ["The answer is class.", "Modules hold values and objects of many kinds."]
  options = [["class", "module", "value"], ["objects", "strings", "numbers"]]
  flat = encode_examples(tokenizer, [TextExample(a, o, None, "") for a, row in
                                     zip(articles, options) for o in row], LENGTH)
  features = {k: v.reshape(2, 3, LENGTH) for k, v in flat.items()}
  expected = model(features).numpy()
  out = serve(path, {"s": ("serving_default", {"text": articles, "options": options}),
                     "i": ("serve_ids", {k: v.tolist() for k, v in features.items()})})
  np.testing.assert_allclose(out["s"]["logits"], expected, atol=1e-5)
  np.testing.assert_allclose(out["i"]["logits"], expected, atol=1e-5)
  assert out["s"]["predicted_label"] == expected.argmax(-1).tolist()
  # The export check builds the same layouts: options [B, C] of texts, ids [B, C, T].
  assert [line.split(":")[0] for line in check_saved_model(path, model, tokenizer)] == [
      "serve_ids (input_ids, segment_ids, input_mask)", "serving_default (text, options)"]


def test_bfloat16_export_serves_the_bfloat16_model_with_float32_outputs(
    sp_model, tokenizer, tmp_path, policy, serve):
  policy("mixed_bfloat16")
  config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size, dropout=0.0, dropatt=0.0)
  classifier, backbone = XLNetClassifier(XLNetModel(config), 3), XLNetModel(config)
  for model in (classifier, backbone):
    randomize_weights(model, 4)
  clf = export_saved_model(classifier, sp_model, str(tmp_path), "clf", LENGTH, text_pairs=True)
  plain = export_saved_model(backbone, sp_model, str(tmp_path), "plain", LENGTH)
  with_xla = export_saved_model(backbone, sp_model, str(tmp_path), "xla", LENGTH, xla=True)
  features = encode_examples(tokenizer, [TextExample(a, b, None, "") for a, b in
                                         zip(TEXTS, PAIRS)], LENGTH)
  ids_request = {"i": ("serve_ids", {k: v.tolist() for k, v in features.items()})}
  sequence = backbone(features)["sequence_output"]
  assert sequence.dtype == tf.bfloat16  # the Keras model computes in bfloat16
  # With its regions compiled as in the Keras model, the served graph gives its numbers.
  np.testing.assert_allclose(serve(with_xla, ids_request)["i"]["sequence_output"],
                             sequence.numpy().astype(np.float32), atol=1e-5)
  loaded = tf.saved_model.load(plain)
  assert {spec.dtype for spec in loaded.signatures["serve_ids"].structured_outputs.values()} \
      == {tf.float32}
  served = np.asarray(serve(plain, ids_request)["i"]["sequence_output"])
  out = serve(clf, {"s": ("serving_default", {"text": TEXTS, "text_b": PAIRS})})["s"]

  # The same weights in float32 give other, nearby numbers: the graphs did run in bfloat16
  # (plain ops round some values the other way than XLA's fused regions: within bfloat16's
  # tolerance of the float32 model, as tests/modeling/test_backbone.py's mixed-precision check).
  policy("float32")
  reference, reference_classifier = XLNetModel(config), XLNetClassifier(XLNetModel(config), 3)
  randomize_weights(reference, 4)
  randomize_weights(reference_classifier, 4)
  expected = reference(features)["sequence_output"].numpy()
  # Relative 2-norm errors (as the int8 checks'): a CPU without AVX512_BF16 rounds more of
  # the plain graph's products to bfloat16 (2.3% here, 0.12 at the largest of values up to 3.1).
  assert 1e-3 < relative_error(expected, served) < 0.05
  logits = reference_classifier(features).numpy()
  assert 1e-4 < relative_error(logits, np.asarray(out["logits"])) < 0.05


def _xla_functions(path):
  """Names of the functions in the SavedModel that must be compiled by XLA."""
  from tensorflow.core.protobuf import saved_model_pb2
  saved = saved_model_pb2.SavedModel()
  with open(os.path.join(path, "saved_model.pb"), "rb") as handle:
    saved.ParseFromString(handle.read())
  return [function.signature.name for function in saved.meta_graphs[0].graph_def.library.function
          if function.attr["_XlaMustCompile"].b]


def test_default_export_has_no_xla_functions_and_xla_export_serves_the_same(
    tokenizer, serve, backbone_exports):
  backbone, plain, with_xla = backbone_exports
  # TF Serving without --xla_cpu_compilation_enabled fails on a function XLA must compile.
  assert _xla_functions(plain) == []
  assert _xla_functions(with_xla)
  features = encode_examples(tokenizer, [TextExample(t, None, None, "") for t in TEXTS], LENGTH)
  expected = backbone(features)["sequence_output"].numpy()
  request = {"b": ("serving_default", {"text": TEXTS})}
  for path in (plain, with_xla):
    np.testing.assert_allclose(serve(path, request)["b"]["sequence_output"], expected,
                               atol=1e-5)


def test_long_document_classifier_serves_the_segments_of_the_python_builders(
    sp_model, tokenizer, tmp_path, serve):
  """Saved as a --max_segments=3 run saves it, loaded as run/export.py loads it: strings in,
  the same split as the Python builders, the Keras model's logits out."""
  config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size, mem_len=LENGTH,
                              dropout=0.0, dropatt=0.0)
  model = XLNetClassifier(XLNetModel(config), 3, max_segments=3)
  randomize_weights(model, 7)
  checkpoints.save_pretrained(model, str(tmp_path / "best"))
  loaded, _ = load_exportable_model(str(tmp_path / "best"), "classifier", sp_path=sp_model)
  assert (loaded.max_segments, loaded.backbone.config.mem_len) == (3, LENGTH)
  path = export_saved_model(loaded, sp_model, str(tmp_path), "long", LENGTH, text_pairs=True)
  assert json.load(open(os.path.join(path, "assets", LONG_DOCUMENTS_FILE))) == {
      "max_segments": 3, "max_seq_length": LENGTH, "mem_len": LENGTH}
  texts = [TEXTS[0] * 2] + TEXTS[1:]  # the first longer than the 3 segments: truncated
  features = encode_examples(tokenizer, [TextExample(a, b, None, "") for a, b in
                                         zip(texts, PAIRS)], LENGTH, max_segments=3)
  assert features["input_ids"].shape == (5, 3, LENGTH)
  assert features["input_mask"][:, 0].sum() > 0, "some text reaches the first segment"
  expected = model(features).numpy()
  outputs = serve(path, {
      "strings": ("serving_default", {"text": texts, "text_b": PAIRS}),
      "ids": ("serve_ids", {k: features[k].tolist() for k in features})})
  np.testing.assert_allclose(outputs["strings"]["logits"], expected, atol=1e-5)
  np.testing.assert_allclose(outputs["ids"]["logits"], expected, atol=1e-5)


# ---- the version directory appears complete or not at all -----------------------------------

# What a finished export holds; a model server polling the base must never find a version
# directory without any of them.
COMPLETE = ("saved_model.pb", os.path.join("variables", "variables.index"), "assets",
            os.path.join("assets.extra", WARMUP_FILE))


class BasePoller(threading.Thread):
  """Lists `<base>/<model>` every 2 ms, as TF Serving's file-system source does, and checks each
  version directory it finds (an all-digit name) for every file of COMPLETE."""

  def __init__(self, model_dir):
    super().__init__(daemon=True)
    self.model_dir, self.names, self.incomplete, self.polls = model_dir, set(), [], 0
    self.without_version = 0  # polls after a version appeared that found none
    self._done = threading.Event()

  def run(self):
    while not self._done.is_set():
      self.polls += 1
      try:
        names = os.listdir(self.model_dir)
      except FileNotFoundError:
        names = []
      self.names.update(names)
      versions = [name for name in names if name.isdigit()]
      if not versions and any(name.isdigit() for name in self.names):
        self.without_version += 1
      for name in versions:
        missing = [part for part in COMPLETE
                   if not os.path.exists(os.path.join(self.model_dir, name, part))]
        if missing:
          self.incomplete.append((name, missing))
      self._done.wait(0.002)

  def stop(self):
    """Stops after two more polls (those that see the end of the export)."""
    polls = self.polls
    while self.polls < polls + 2 and self.is_alive():
      time.sleep(0.001)
    self._done.set()
    self.join()


def _exchange_supported(folder):
  first, second = folder / "first", folder / "second"
  first.mkdir()
  second.mkdir()
  try:
    return whole_directories._exchange(str(first), str(second))
  finally:
    shutil.rmtree(first)
    shutil.rmtree(second)


def test_a_version_appears_complete_an_existing_one_is_refused_or_swapped_in(sp_model, tokenizer,
                                                                           tmp_path):
  config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size)
  backbone = XLNetModel(config)
  model_dir = tmp_path / "serving" / "m"
  # The work folder of a killed export of this version: removed, with a line.
  stale = model_dir / f".export-1-99999999@{socket.gethostname()}-x"
  stale.mkdir(parents=True)
  (stale / "saved_model.pb").write_bytes(b"half")
  poller = BasePoller(str(model_dir))
  poller.start()
  try:
    path = export_saved_model(backbone, sp_model, str(tmp_path / "serving"), "m", LENGTH)
  finally:
    poller.stop()
  assert path == str(model_dir / "1") and sorted(os.listdir(model_dir)) == ["1"]
  assert poller.incomplete == [] and "1" in poller.names and poller.polls > 10
  assert any(name.startswith(".export-1-") and name != stale.name for name in poller.names), (
      "the poller saw the export's work folder: it watched the whole export")

  # An existing version: one line naming --version, refused before any work, untouched.
  before = os.stat(model_dir / "1" / "saved_model.pb")
  with pytest.raises(UserInputError, match=rf"^{model_dir}/1: version 1 exists; export under "
                     r"another --version \(TF Serving serves the highest\), or pass --overwrite "
                     "to replace it$"):
    export_saved_model(backbone, sp_model, str(tmp_path / "serving"), "m", LENGTH)
  assert os.stat(model_dir / "1" / "saved_model.pb") == before
  assert sorted(os.listdir(model_dir)) == ["1"]

  # overwrite: the new version swapped in when complete; the old one gone.
  (model_dir / "1" / "assets" / "old-export").write_text("")
  swap_in_one_step = _exchange_supported(tmp_path)
  poller = BasePoller(str(model_dir))
  poller.start()
  try:
    export_saved_model(backbone, sp_model, str(tmp_path / "serving"), "m", LENGTH,
                       warmup_requests=2, overwrite=True)
  finally:
    poller.stop()
  assert poller.incomplete == [] and poller.polls > 10
  if swap_in_one_step:
    assert poller.without_version == 0
  assert sorted(os.listdir(model_dir)) == ["1"]
  assert not (model_dir / "1" / "assets" / "old-export").exists()
  assert tf.data.TFRecordDataset(str(model_dir / "1" / "assets.extra" / WARMUP_FILE)).reduce(
      0, lambda n, _: n + 1).numpy() == 2


def test_an_export_failing_midway_leaves_nothing(sp_model, tokenizer, tmp_path, monkeypatch):
  """A failure after the SavedModel is written (the warm-up requests): no version, no work
  folder, and no model or base folder, as the export made them."""
  config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size)

  def failing(*arguments):
    saved_model.write_warmup_requests.__wrapped__(*arguments)
    raise OSError(28, "No space left on device")

  failing.__wrapped__ = saved_model.write_warmup_requests
  monkeypatch.setattr(saved_model, "write_warmup_requests", failing)
  with pytest.raises(OSError, match="No space left on device"):
    export_saved_model(XLNetModel(config), sp_model, str(tmp_path / "serving"), "m", LENGTH)
  assert os.listdir(tmp_path) == []


def test_int8_export_serves_the_quantized_model(sp_model, tokenizer, tmp_path, serve):
  """quantize="int8": the model quantized and checked against its float outputs; the graph
  multiplies with oneDNN's int8 kernel on constant weights; served from strings in a process
  without xlnet_tf, within a few percent of the float model and equal to the quantized one."""
  config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size, dropout=0.0, dropatt=0.0)
  model = XLNetClassifier(XLNetModel(config), 3)
  randomize_weights(model, 0)
  features = encode_examples(tokenizer, [TextExample(t, None, None, "") for t in TEXTS], LENGTH)
  expected = model(features).numpy()
  path = export_saved_model(model, sp_model, str(tmp_path), "int8", LENGTH, quantize="int8")
  assert model.quantization == "int8"
  with open(os.path.join(path, "saved_model.pb"), "rb") as graph:
    # oneDNN's int8 kernel where this TensorFlow and CPU run it (int8_packing checks once);
    # elsewhere the integer products of the portable path.
    assert (b"QuantizedMatMulWithBias" in graph.read()) == onednn_available()
  outputs = serve(path, {"strings": ("serving_default", {"text": TEXTS}),
                         "ids": ("serve_ids", {k: features[k].tolist() for k in features})})
  served = np.asarray(outputs["strings"]["logits"])
  np.testing.assert_allclose(outputs["ids"]["logits"], served, atol=1e-5)
  # This model's int8 logits are 2.9% from float with 8-bit rows, 12.3% with the 7-bit rows of
  # a CPU without VNNI (int8_packing.row_top); a broken export is off by ~100%.
  assert 1e-5 < relative_error(expected, served) < (0.05 if row_top() == 255 else 0.15)
  np.testing.assert_allclose(served, model(features).numpy(), atol=1e-4 * np.abs(expected).max())
  with pytest.raises(UserInputError, match="already quantized"):
    export_saved_model(model, sp_model, str(tmp_path), "again", LENGTH, quantize="int8")
  with pytest.raises(UserInputError, match="must be one of"):
    export_saved_model(model, sp_model, str(tmp_path), "int4", LENGTH, quantize="int4")
  assert sorted(os.listdir(tmp_path)) == ["int8"]
