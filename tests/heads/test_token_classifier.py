import json
import os
import re

import numpy as np
import tensorflow as tf

from cli_output import run_tool
from model_inputs import padded_pair_batch, tiny_config
from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.heads.token_classifier import XLNetTokenClassifier, token_loss


def test_loss_skips_ignored_labels():
  logits = tf.constant(np.log([[[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]]), tf.float32)
  loss = token_loss([[0, -1, 1]], logits)
  np.testing.assert_allclose(float(loss), (np.log(2) - np.log(0.8)) / 2, rtol=1e-6)


def test_logits_per_token(rng):
  model = XLNetTokenClassifier(XLNetModel(tiny_config()), 5)
  inputs = padded_pair_batch(rng, 2, 8, 50, pad_lengths=[0, 3])
  logits = model(inputs).numpy()
  sequence = model.backbone(inputs)["sequence_output"].numpy()
  kernel, bias = model.logit.get_weights()
  np.testing.assert_allclose(logits, sequence @ kernel + bias, atol=1e-5)
  assert set(model.huggingface_head_names()) == {"classifier.weight", "classifier.bias"}


def test_tagger_cli_learns_a_keyword_tagger(sp_model, tmp_path):
  rng = np.random.default_rng(0)
  words = ["class", "function", "module", "value", "object", "return", "list", "string"]
  keywords = {"class", "return"}
  lines = []
  for _ in range(200):
    for word in rng.choice(words, 5):
      lines.append(f"{word} {'B-KW' if word in keywords else 'O'}")
    lines.append("")
  (tmp_path / "train.conll").write_text("\n".join(lines))
  (tmp_path / "dev.conll").write_text("\n".join(lines[:60]))
  XLNetConfig.preset("tiny", n_token=XLNetTokenizer(sp_model).vocab_size, dropout=0.0,
                     dropatt=0.0).to_json_file(str(tmp_path / "config.json"))
  result = run_tool(
      "run/tagger.py", f"--train_file={tmp_path}/train.conll",
      f"--dev_file={tmp_path}/dev.conll", f"--test_file={tmp_path}/dev.conll",
      f"--sp_path={sp_model}", f"--model_config={tmp_path}/config.json",
      "--max_seq_length=16", "--train_batch_size=16", "--train_steps=300", "--eval_every=150",
      "--save_steps=100", "--learning_rate=3e-3", f"--output_dir={tmp_path}/out", "--do_train",
      "--do_eval", "--do_predict")
  assert result.returncode == 0, result.stderr[-3000:]
  # It saved what resumes it every 100 steps and, finished, keeps only what says so.
  assert os.listdir(tmp_path / "out" / "checkpoints") == ["finished.json"]
  scores = json.load(open(tmp_path / "out" / "dev_metrics.json"))
  assert scores["f1"] > 0.95, scores
  assert json.load(open(tmp_path / "out" / "best" / "labels.json")) == ["O", "B-KW"]
  # best/ holds the tokenizer the run read text with, and its packed length (for the export).
  best = tmp_path / "out" / "best"
  assert (best / "spiece.model").read_bytes() == open(sp_model, "rb").read()
  assert json.load(open(best / "preprocessor.json")) == {"sequence_length": 16,
                                                         "num_segments": 1}
  # Progress off a terminal: plain lines, one per dev evaluation.
  assert re.findall(r"^step (\d+)/300: dev .*f1", result.stdout, re.M) == ["150", "300"]
  assert "\r" not in result.stdout
  predictions = open(tmp_path / "out" / "test_predictions.conll").read().split("\n")
  assert predictions[0].count(" ") == 2
