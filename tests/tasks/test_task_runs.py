"""Each fine-tuning family run whole, in this process, through its task and the one driver
(tasks.run_finetuning), a tiny backbone trained a few steps; then its outputs checked against
what the test computes itself from the files written (the official SQuAD scores from
predictions.json, RACE's accuracy from the kept weights' logits, entity F1 from the tags
written, accuracy from the predictions), and the run's settings against run_config.json.
The SQuAD, RACE and tagging runs are docs/finetuning.md's Python blocks, run as written on
tiny data written under the names they use."""

import collections
import contextlib
import dataclasses
import io
import json
import os
import re
import string

import numpy as np
import pytest

from repository import ROOT
from task_files import (CONLL_SENTENCES, conll_file, race_folder, reordering_task, squad_file,
                        tiny_config_file)
from xlnet_tf import XLNetConfig, XLNetModel, XLNetMultipleChoice, checkpoints
from xlnet_tf.tasks import FinetuningOptions, ModelSource, run_finetuning
from xlnet_tf.tasks.classification import ClassificationOptions, ClassificationTask
from xlnet_tf.tasks.race import encode_race, read_race
from xlnet_tf.tasks.squad import SquadOptions
from xlnet_tf.tasks.tagging import TaggingOptions
from xlnet_tf.text.read_report import ReadReport
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.training import run_config
from xlnet_tf.utils.errors import UserInputError

FINETUNING_DOCS = os.path.join(ROOT, "docs", "finetuning.md")


def finetuning(**changes) -> FinetuningOptions:
  """A few steps of a tiny model: no XLA (compiling would be most of the time), no progress."""
  return FinetuningOptions(**{"train_steps": 3, "batch_size": 4, "learning_rate": 1e-3,
                              "warmup_steps": 1, "jit_compile": False, "progress": "none",
                              **changes})


@pytest.fixture(scope="module")
def model_source(sp_model, tmp_path_factory):
  """A backbone of fresh weights: a tiny config and the test SentencePiece model."""
  config = tiny_config_file(tmp_path_factory.mktemp("model") / "xlnet_config.json", sp_model)
  return ModelSource(model_config=config, sp_path=sp_model)


def read(path):
  with open(path, encoding="utf-8") as handle:
    return json.load(handle)


def python_blocks_running_a_task():
  with open(FINETUNING_DOCS, encoding="utf-8") as handle:
    blocks = re.findall(r"```python\n(.*?)```", handle.read(), flags=re.S)
  return [block for block in blocks if "run_finetuning(" in block]


@pytest.fixture(scope="module")
def docs_runs(sp_model, tmp_path_factory):
  """(the directory, the blocks' names, what they printed) after docs/finetuning.md's Python
  runs, in a directory holding a tiny pretrained backbone where pretraining writes it, a
  SQuAD file as train-v2.0.json and dev-v2.0.json, a RACE folder and CoNLL files (eng.testa
  and eng.testb alike)."""
  root = tmp_path_factory.mktemp("docs_runs")
  tokenizer = XLNetTokenizer(sp_model)
  pretrained = root / "pretrain_output" / "model" / "pretrained"
  checkpoints.save_pretrained(
      XLNetModel(XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size)), str(pretrained))
  tokenizer.save_pretrained(str(pretrained))
  squad_file(root / "train-v2.0.json")
  squad_file(root / "dev-v2.0.json")
  race_folder(root / "RACE", questions_per_file=1)
  conll_file(root / "eng.train")
  for name in ("eng.testa", "eng.testb"):
    conll_file(root / name, CONLL_SENTENCES[1:])
  blocks = python_blocks_running_a_task()
  assert len(blocks) == 3
  namespace, printed = {}, io.StringIO()
  with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
    patch.chdir(root)
    for block in blocks:
      exec(compile(block, FINETUNING_DOCS, "exec"), namespace)  # noqa: S102
  return root, namespace, printed.getvalue()


# ---- SQuAD: the official scores, recomputed from predictions.json --------------------------

def _normalized(text):
  """The official evaluation script's normalisation: lower case, no punctuation, no articles,
  single spaces."""
  text = "".join(char for char in text.lower() if char not in set(string.punctuation))
  return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def _f1(prediction, truth):
  predicted, gold = _normalized(prediction).split(), _normalized(truth).split()
  if not predicted or not gold:
    return float(predicted == gold)
  common = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
  if not common:
    return 0.0
  precision, recall = common / len(predicted), common / len(gold)
  return 2 * precision * recall / (precision + recall)


def official_scores(squad_path, predictions):
  """EM and F1 (percent), each question's best over its references ("" for no answer)."""
  exact, f1 = [], []
  for question in read(squad_path)["data"][0]["paragraphs"][0]["qas"]:
    truths = [answer["text"] for answer in question["answers"]] or [""]
    prediction = predictions[question["id"]]
    exact.append(max(float(_normalized(prediction) == _normalized(t)) for t in truths))
    f1.append(max(_f1(prediction, t) for t in truths))
  return 100 * np.mean(exact), 100 * np.mean(f1)


def test_squad_answers_and_scores_as_the_official_script(docs_runs):
  root, namespace, printed = docs_runs
  out = root / "out" / "squad"
  predictions = read(out / "predictions.json")
  null_odds = read(out / "null_odds.json")
  written = read(out / "results.json")
  assert sorted(predictions) == sorted(null_odds) == ["q1", "q2", "q3", "q4"]
  threshold = written["null_score_threshold"]  # the best on the file, which has answers
  assert all(predictions[q] == "" for q, odds in null_odds.items() if odds > threshold)
  exact, f1 = official_scores(root / "dev-v2.0.json", predictions)
  assert written["scores"] == pytest.approx({"exact": exact, "f1": f1, "total": 4})
  results = namespace["squad_results"]
  assert results["dev"] == written and results["predictions"] == predictions
  assert "Training 1 step: 2 epochs of 4 windows at --train_batch_size=16\n" in printed
  history = read(out / "train_history.json")
  assert [h["step"] for h in history["history"]] == [1] and history["metric"] == "f1"
  assert history == json.loads(json.dumps(results["train"]))
  # Recorded resolved: the epochs as the step they came to.
  squad = namespace["squad"]
  assert run_config.read(str(out / "run_config.json"), SquadOptions) == dataclasses.replace(
      squad, finetuning=dataclasses.replace(squad.finetuning, train_steps=1,
                                            num_train_epochs=None))
  assert {"spiece.model", "preprocessor.json", "head.json"} <= set(os.listdir(out / "best"))


# ---- RACE: accuracy from the kept weights' logits -------------------------------------------

def test_race_scores_the_kept_weights(docs_runs, sp_model):
  root, _, _ = docs_runs
  out = root / "out" / "race"
  model = checkpoints.load_pretrained_head(str(out / "best"), XLNetMultipleChoice)
  tokenizer = XLNetTokenizer(sp_model)

  def logits(split):
    questions = read_race(str(root / "RACE"), split, ReadReport())
    features = encode_race(tokenizer, questions, 256)
    inputs = {key: features[key] for key in ("input_ids", "segment_ids", "input_mask")}
    return questions, model(inputs).numpy()

  questions, dev_logits = logits("dev")
  answers = np.array(["ABCD".index(read(q.where.split("#")[0])["answers"][int(
      q.where.split("#")[1])]) for q in questions])
  correct = dev_logits.argmax(-1) == answers
  high = np.array([q.level == "high" for q in questions])
  assert read(out / "dev_metrics.json") == pytest.approx({
      "accuracy": correct.mean(), "middle": correct[~high].mean(), "high": correct[high].mean()})
  questions, test_logits = logits("test")
  assert read(out / "test_predictions.json") == {  # named as the run named the folder
      os.path.relpath(q.where, root): "ABCD"[index]
      for q, index in zip(questions, test_logits.argmax(-1))}


# ---- tagging: entity F1 from the tags written ------------------------------------------------

def _entities(tags):
  """(type, start, end) of each IOB2 entity."""
  spans = []
  for position, tag in enumerate(tags):
    if tag.startswith("B-") or (tag.startswith("I-") and (
        not spans or spans[-1][2] != position or spans[-1][0] != tag[2:])):
      spans.append([tag[2:], position, position + 1])
    elif tag.startswith("I-"):
      spans[-1][2] = position + 1
  return {tuple(span) for span in spans}


def test_tagging_scores_the_tags_it_writes(docs_runs):
  """eng.testb is eng.testa: the entity F1 of the tags written is the dev score."""
  root, namespace, printed = docs_runs
  out = root / "out" / "ner"
  blocks = (out / "test_predictions.conll").read_text().split("\n\n")
  rows = [[line.split(" ") for line in block.splitlines()] for block in blocks if block]
  assert [[(word, gold) for word, gold, _ in sentence] for sentence in rows] == [
      [tuple(pair) for pair in sentence] for sentence in CONLL_SENTENCES[1:]]
  gold = [_entities([row[1] for row in sentence]) for sentence in rows]
  predicted = [_entities([row[2] for row in sentence]) for sentence in rows]
  correct = sum(len(g & p) for g, p in zip(gold, predicted))
  precision = correct / max(1, sum(map(len, predicted)))
  recall = correct / sum(map(len, gold))
  f1 = 2 * precision * recall / (precision + recall) if correct else 0.0
  assert read(out / "dev_metrics.json") == pytest.approx(
      {"precision": precision, "recall": recall, "f1": f1})
  assert read(out / "best" / "labels.json") == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER",
                                                 "I-ORG", "I-PER"]
  assert ("Training 1 step: 3 epochs of 4 sentences at --train_batch_size=16 (the default; "
          "--num_train_epochs or --train_steps sets it)\n") in printed
  recorded = run_config.read(str(out / "run_config.json"), TaggingOptions)
  assert recorded.finetuning.train_steps == 1 and recorded.finetuning.runtime.seed == 1
  # The run without training took the labels and weights training kept.
  assert namespace["tagged_again"]["dev"] == read(out / "dev_metrics.json")
  assert "train" not in namespace["tagged_again"]


# ---- classification: accuracy from the predictions written ----------------------------------

def test_classification_scores_the_predictions_it_writes(model_source, tmp_path, capsys):
  """Trained for the default length (3 epochs); then a regression run into the same
  output_dir is refused, naming what differs, and leaves the classification run's files as
  they were."""
  train = reordering_task(tmp_path / "train.csv", 16, 0, names=("other", "same"))
  dev = reordering_task(tmp_path / "dev.csv", 12, 1, names=("other", "same"))
  out = tmp_path / "out"
  options = ClassificationOptions(train_file=train, dev_file=dev, test_file=dev,
                                  max_seq_length=16,
                                  finetuning=finetuning(train_steps=None, batch_size=8),
                                  output_dir=str(out), model=model_source, do_eval=True,
                                  do_predict=True)
  run_finetuning(ClassificationTask(options))
  assert ("Training 6 steps: 3 epochs of 16 examples at --train_batch_size=8 (the default; "
          "--num_train_epochs or --train_steps sets it)\n") in capsys.readouterr().out
  lines = (out / "generic_test_predictions.tsv").read_text().splitlines()
  predicted = [line.split("\t")[1] for line in lines[1:]]
  labels = [line.rsplit(",", 1)[1] for line in open(dev, encoding="utf-8").read().splitlines()[1:]]
  assert read(out / "dev_metrics.json")["accuracy"] == pytest.approx(
      np.mean(np.array(predicted) == np.array(labels)))
  assert read(out / "best" / "labels.json") == ["other", "same"]
  # A run directory holds one run's kind (it used to report success beside the old labels).
  before = {path.name: path.read_bytes() for path in [*out.iterdir(), *(out / "best").iterdir()]
            if path.is_file()}
  regression = dataclasses.replace(  # labels 0 and 1 read as numbers
      options, regression=True, train_file=reordering_task(tmp_path / "scores.csv", 8, 2),
      dev_file=None, test_file=None, do_eval=False, do_predict=False)
  with pytest.raises(UserInputError) as error:
    run_finetuning(ClassificationTask(regression))
  assert str(error.value) == (
      f"{out}/best: holds the model of another run (num_classes 2, not 1); use another "
      "--output_dir, or remove it to train this one there")
  assert {path.name: path.read_bytes() for path in [*out.iterdir(), *(out / "best").iterdir()]
          if path.is_file()} == before
