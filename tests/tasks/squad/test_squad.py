import json
import os
import re

import numpy as np
import pytest

from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf.text.read_report import ReadReport
from xlnet_tf.tasks.squad import SquadExample, answer_text, build_features, read_squad
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.heads.question_answering import XLNetQuestionAnswering, squad_loss
from xlnet_tf.tasks.squad import decoding, metrics
from cli_output import run_tool

CONTEXT = ("The class statement, introduced in Python 2.2, creates a new type; its métaclass "
           "decides how (and when) the body runs.")


def squad_file(path, version_two=True):
  qas = [{"id": "q1", "question": "What creates a new type?",
          "answers": [{"text": "The class statement", "answer_start": 0}]},
         {"id": "q2", "question": "What decides how the body runs?",
          "answers": [{"text": "its métaclass", "answer_start": CONTEXT.index("its")}]},
         {"id": "q3", "question": "Who wrote it?", "answers": [], "is_impossible": True},
         {"id": "q4", "question": "Broken?", "answers": [{"text": "nowhere", "answer_start": 3}]}]
  path.write_text(json.dumps({"version": "v2.0", "data": [
      {"title": "t", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}))
  return str(path)


def test_reader_counts_misaligned_answers(tmp_path):
  report = ReadReport()
  examples = read_squad(squad_file(tmp_path / "d.json"), report)
  assert [e.qas_id for e in examples] == ["q1", "q2", "q3"]
  assert examples[2].is_impossible and not examples[2].answers
  (reason, where), = report.skipped.items()
  assert "answer text not found" in reason and "id q4" in where[0]


def test_answers_survive_the_round_trip_through_pieces(tmp_path, sp_model):
  tokenizer = XLNetTokenizer(sp_model)
  examples = read_squad(squad_file(tmp_path / "d.json"), ReadReport())
  arrays, windows = build_features(tokenizer, examples, max_seq_length=32, doc_stride=8,
                                   max_query_length=10, training=True)
  assert len(windows) > len(examples)  # the context needs several windows
  for feature, (example_index, char_spans) in enumerate(windows):
    example = examples[example_index]
    start, end = arrays["start_positions"][feature], arrays["end_positions"][feature]
    if arrays["is_impossible"][feature]:
      assert start == end == arrays["cls_index"][feature] == 31
      continue
    assert arrays["p_mask"][feature, start] == 0 and arrays["p_mask"][feature, end] == 0
    assert answer_text(example, char_spans, start, end) == example.answers[0]["text"]
  assert arrays["input_ids"][0, -1] == tokenizer.special_ids.cls
  assert (arrays["p_mask"][:, -1] == 0).all()  # <cls> stands for "no answer"


def test_official_normalisation_and_scores():
  assert metrics.normalize_answer("The  Class, statement!") == "class statement"
  assert metrics.token_f1("a class statement here", "the class statement") == \
      pytest.approx(2 * (2 / 3) * 1.0 / (2 / 3 + 1.0))
  assert metrics.token_f1("", "") == 1.0 and metrics.token_f1("x", "") == 0.0
  examples = [SquadExample("a", "q", "c", [{"text": "Paris", "answer_start": 0}], False, ""),
              SquadExample("b", "q", "c", [], True, "")]
  scores = metrics.squad_scores(examples, {"a": "paris", "b": "London"})
  assert scores == {"exact": 50.0, "f1": 50.0, "total": 2}


def test_decoding_picks_the_known_span_and_no_answer():
  context = "alpha beta gamma delta"
  example = SquadExample("q", "?", context, [{"text": "beta gamma", "answer_start": 6}], False,
                         "")
  impossible = SquadExample("n", "?", context, [], True, "")
  # One piece per word (characters of alpha, beta, gamma, delta), then the question etc.
  char_spans = np.array([[-1, -1], [0, 5], [6, 10], [11, 16], [17, 22], [-1, -1], [-1, -1],
                         [-1, -1]])
  k, e = 2, 2
  outputs = {
      "start_top_index": np.array([[2, 1], [1, 2]]),
      "start_top_log_probs": np.array([[-0.1, -2.0], [-0.5, -0.6]]),
      "end_top_index": np.array([[[3, 1], [4, 2]], [[1, 2], [3, 4]]]),  # [F, K, E]
      "end_top_log_probs": np.array([[[-0.2, -0.1], [-3.0, -3.0]], [[-1, -1], [-1, -1]]]),
      "cls_logits": np.array([-5.0, 4.0])}
  windows = [(0, char_spans), (1, char_spans)]
  predictions, nulls = decoding.decode([example, impossible], windows, outputs, 10)
  # (2, 1) is invalid (end before start): best is start 2 ("beta") .. end 3 ("gamma").
  assert predictions["q"] == "beta gamma"
  threshold, scores = metrics.best_null_threshold([example, impossible], predictions,
                                                        nulls)
  assert -5.0 < threshold < 4.0 and scores["exact"] == 100.0
  assert decoding.apply_null_threshold(predictions, nulls, threshold) == {
      "q": "beta gamma", "n": ""}
  assert k == e == 2


def test_head_outputs_and_loss(sp_model, tmp_path):
  tokenizer = XLNetTokenizer(sp_model)
  examples = read_squad(squad_file(tmp_path / "d.json"), ReadReport())
  arrays, _ = build_features(tokenizer, examples, 48, 16, 12, training=True)
  config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size)
  model = XLNetQuestionAnswering(XLNetModel(config), start_n_top=3, end_n_top=2)
  outputs = model(arrays, training=True)
  loss = float(squad_loss(outputs, arrays["start_positions"], arrays["end_positions"],
                          arrays["is_impossible"]))
  assert np.isfinite(loss) and loss > 0
  inference = model({k: v for k, v in arrays.items() if k not in (
      "start_positions", "end_positions", "is_impossible")})
  count = len(arrays["input_ids"])
  assert inference["end_top_index"].shape == (count, 3, 2)
  # Never a start or end where p_mask forbids one.
  starts = inference["start_top_index"].numpy()
  assert (np.take_along_axis(arrays["p_mask"], starts, 1) == 0).all()
  assert set(model.huggingface_head_names()) >= {"end_logits.LayerNorm.weight",
                                                 "answer_class.dense_1.weight"}


def test_squad_cli(sp_model, tmp_path):
  path = squad_file(tmp_path / "train.json")
  XLNetConfig.preset("tiny", n_token=XLNetTokenizer(sp_model).vocab_size).to_json_file(
      str(tmp_path / "config.json"))
  result = run_tool(
      "run/squad.py", f"--train_file={path}", f"--predict_file={path}",
      f"--sp_path={sp_model}", f"--model_config={tmp_path}/config.json",
      "--max_seq_length=48", "--doc_stride=16", "--max_query_length=12",
      "--train_batch_size=4", "--train_steps=3", "--warmup_steps=1", "--save_steps=1",
      f"--output_dir={tmp_path}/out", "--do_train", "--do_predict")
  assert result.returncode == 0, result.stderr[-3000:]
  # It saved what resumes it after steps 1 and 2 and, finished, keeps only what says so.
  assert os.listdir(tmp_path / "out" / "checkpoints") == ["finished.json"]
  predictions = json.load(open(tmp_path / "out" / "predictions.json"))
  assert set(predictions) == {"q1", "q2", "q3"}
  results = json.load(open(tmp_path / "out" / "results.json"))
  assert "null_score_threshold" in results and 0 <= results["scores"]["f1"] <= 100
  assert re.findall(r"^step (\d)/3: dev exact .* f1", result.stdout, re.M) == ["3"]
  # best/ holds the tokenizer the run read text with, and its packed length: what an export
  # of best/ takes without --sp_path.
  best = tmp_path / "out" / "best"
  assert (best / "spiece.model").read_bytes() == open(sp_model, "rb").read()
  assert json.load(open(best / "preprocessor.json")) == {"sequence_length": 48,
                                                         "num_segments": 1}
