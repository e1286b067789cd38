"""Transformer-XL's left-to-right LM (objective clm): the stream layout of the records, the loss
with memory against one pass over memory + segment, evaluation with and without memory, and
the CLIs (pretrain --objective=clm, evaluate_lm)."""

import json
import math
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from forked_tools import run_forked
from xlnet_tf import XLNetConfig, XLNetModel, XLNetTokenizer, checkpoints
from xlnet_tf.heads import XLNetPretrainer
from xlnet_tf.pretraining import lm_evaluation
from xlnet_tf import objectives
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.pretraining.loop import PretrainingOptions, PretrainingRun
from xlnet_tf.pretraining.data.records import pretraining_dataset
from xlnet_tf.pretraining.data.stage import create_pretraining_data

RUN = os.path.join(os.path.dirname(__file__), "..", "..", "run")


def tiny_lm(mem_len=0, seed=0, n_token=1000):
  """Weights drawn wide (init_std 0.3) so that the context moves the predictions."""
  keras.utils.set_random_seed(seed)
  config = XLNetConfig.preset("tiny", n_token=n_token, attn_type="uni", mem_len=mem_len,
                              dropout=0.0, dropatt=0.0, init_std=0.3)
  return XLNetPretrainer(XLNetModel(config), objective="clm")


def test_records_are_consecutive_segments_of_the_stream(corpus_files, sp_model, tmp_path):
  settings = PretrainingDataConfig(seq_len=16, reuse_len=0, bsz_per_host=3, bi_data=False,
                                   objective="clm")
  create_pretraining_data(corpus_files[:1], sp_model, str(tmp_path), settings, num_workers=1)
  # The stream, independently: every line's ids, <eod> after each document.
  tokenizer = XLNetTokenizer(sp_model)
  stream = []
  for document in open(corpus_files[0], encoding="utf-8").read().split("\n\n"):
    lines = [line for line in document.split("\n") if line.strip()]
    for line in lines:
      stream.extend(tokenizer.encode(line))
    if lines:
      stream.append(tokenizer.special_ids.eod)
  row_len = len(stream) // 3
  rows = np.array(stream[:3 * row_len]).reshape(3, row_len)
  batches = list(pretraining_dataset(str(tmp_path), repeat=False))
  assert len(batches) == (row_len - 1) // 16 > 3
  for step, batch in enumerate(batches):
    begin = step * 16
    np.testing.assert_array_equal(batch["input_ids"], rows[:, begin:begin + 16])
    np.testing.assert_array_equal(batch["target"], rows[:, begin + 1:begin + 17])
    np.testing.assert_array_equal(batch["target_mask"], np.ones([3, 16]))


def test_clm_settings_and_model_are_checked(sp_model):
  with pytest.raises(ValueError, match="reuse_len must be 0"):
    PretrainingDataConfig(seq_len=16, reuse_len=8, bi_data=False, objective="clm")
  with pytest.raises(ValueError, match="bi_data must be False"):
    PretrainingDataConfig(seq_len=16, reuse_len=0, bsz_per_host=4, objective="clm")
  with pytest.raises(ValueError, match="attn_type 'uni'"):
    XLNetPretrainer(XLNetModel(XLNetConfig.preset("tiny")), objective="clm")


def test_loss_with_memory_equals_one_pass_over_memory_and_segment(rng):
  """Two segments of 8 with a memory of 8 = one pass over 16 (batch 3), logits and loss."""
  model = tiny_lm(mem_len=8)
  ids = rng.integers(5, 1000, size=[3, 17]).astype(np.int32)
  first = model({"input_ids": ids[:, :8]})
  second = model({"input_ids": ids[:, 8:16], "mems": first["new_mems"]})
  whole = tiny_lm(mem_len=0)
  whole.set_weights(model.get_weights())
  one_pass = whole({"input_ids": ids[:, :16]})["logits"]
  np.testing.assert_allclose(np.concatenate([first["logits"], second["logits"]], axis=1),
                             one_pass, atol=2e-5)
  segmented = lm_evaluation.evaluate_stream(model, ids.reshape(-1), tgt_len=8, mem_len=8,
                                            batch_size=3)
  single = lm_evaluation.evaluate_stream(model, ids.reshape(-1), tgt_len=16, mem_len=0,
                                         batch_size=3)
  assert segmented.tokens == single.tokens == 3 * 16
  assert segmented.loss == pytest.approx(single.loss, rel=1e-5)
  # A memory of several segments: six segments of 8 with a memory of 40 = one pass over 48.
  longer = rng.integers(5, 1000, size=[2 * 49]).astype(np.int32)
  assert lm_evaluation.evaluate_stream(model, longer, tgt_len=8, mem_len=40, batch_size=2).loss \
      == pytest.approx(lm_evaluation.evaluate_stream(model, longer, tgt_len=48, mem_len=0,
                                                     batch_size=2).loss, rel=1e-5)
  # Memory matters: without it the second segment's loss differs.
  independent = lm_evaluation.evaluate_stream(model, ids.reshape(-1), tgt_len=8, mem_len=0,
                                              batch_size=3)
  assert abs(independent.loss - single.loss) > 1e-3


def test_half_loss_is_the_mean_over_each_segments_recent_half(rng):
  """--loss_positions=half (Transformer-XL's Table 5): the training batch's loss counts only
  positions T/2..T-1 of each segment, the mean of their losses computed by hand."""
  model = tiny_lm(mem_len=8)
  ids = rng.integers(5, 1000, size=[3, 9]).astype(np.int32)
  batch = {"input_ids": ids[:, :-1], "target": ids[:, 1:],
           "target_mask": np.ones([3, 8], np.float32)}
  half = objectives.recent_half_targets(batch)
  np.testing.assert_array_equal(half["target_mask"], [[0] * 4 + [1] * 4] * 3)
  outputs = model({"input_ids": batch["input_ids"]})
  logits = outputs["logits"].numpy().astype(np.float64)
  log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  losses = -np.take_along_axis(log_probs, batch["target"][..., None], -1)[..., 0]
  assert float(model.pretraining_loss(outputs, half)) == pytest.approx(losses[:, 4:].mean(),
                                                                       rel=1e-5)
  assert abs(losses[:, 4:].mean() - losses.mean()) > 1e-3  # the half differs from the whole
  with pytest.raises(ValueError, match="--loss_positions must be 'full' for objective perm"):
    objectives.check_loss_positions("half", objectives.PERMUTATION_LM)


def test_evaluation_without_memory_equals_independent_segments(rng):
  model = tiny_lm(mem_len=16, seed=1)
  ids = rng.integers(5, 1000, size=[2 * 30]).astype(np.int32)  # 2 rows of 30: 4 segments
  result = lm_evaluation.evaluate_stream(model, ids, tgt_len=8, mem_len=0, batch_size=2,
                                         characters=100)
  rows = ids.reshape(2, 30)
  expected_sum, expected_tokens = 0.0, 0
  for begin in range(0, 29, 8):
    end = min(begin + 8, 29)
    logits = model({"input_ids": rows[:, begin:end]})["logits"].numpy().astype(np.float64)
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(
        -1, keepdims=True)) - logits.max(-1, keepdims=True)
    targets = rows[:, begin + 1:end + 1]
    expected_sum -= np.take_along_axis(log_probs, targets[..., None], -1).sum()
    expected_tokens += targets.size
  assert result.tokens == expected_tokens == 2 * 29
  assert result.loss_sum == pytest.approx(expected_sum, rel=1e-5)
  assert result.bits_per_character == pytest.approx(expected_sum / math.log(2) / 100, rel=1e-5)
  assert result.perplexity == pytest.approx(math.exp(expected_sum / expected_tokens), rel=1e-5)


def test_evaluation_refuses_bad_input(rng):
  model = tiny_lm()
  with pytest.raises(ValueError, match="shorter than one segment.*eval_tgt_len=16"):
    lm_evaluation.evaluate_stream(model, np.arange(10, 26), tgt_len=16, mem_len=0)
  with pytest.raises(ValueError, match="eval_tgt_len must be positive"):
    lm_evaluation.evaluate_stream(model, np.arange(10, 60), tgt_len=0, mem_len=0)
  with pytest.raises(ValueError, match="mem_len must be >= 0"):
    lm_evaluation.evaluate_stream(model, np.arange(10, 60), tgt_len=8, mem_len=-1)
  bidirectional = XLNetPretrainer(XLNetModel(XLNetConfig.preset("tiny")))
  with pytest.raises(ValueError, match="needs a clm model"):
    lm_evaluation.evaluate_stream(bidirectional, np.arange(10, 60), tgt_len=8, mem_len=0)


def test_clm_run_trains_and_saves_the_lm(corpus_files, sp_model, tmp_path):
  settings = PretrainingDataConfig(seq_len=16, reuse_len=0, bsz_per_host=4, bi_data=False,
                                   objective="clm")
  create_pretraining_data(corpus_files[:1], sp_model, str(tmp_path / "data"), settings,
                          num_workers=1)
  config = XLNetConfig.preset("tiny", attn_type="uni", mem_len=16, dropout=0.0, dropatt=0.0)

  def run(steps):
    options = PretrainingOptions(model_dir=str(tmp_path / "model"),
                                 train_data=str(tmp_path / "data"), train_steps=steps,
                                 learning_rate=3e-3, save_steps=10, log_steps=10,
                                 summaries=False, objective="clm")
    keras.utils.set_random_seed(0)
    pretraining = PretrainingRun(tf.distribute.get_strategy(), config, options)
    result = pretraining.train()
    pretraining.export()
    return result

  result = run(40)
  assert result["history"][-1]["loss"] < result["history"][0]["loss"] - 0.5
  lm = checkpoints.load_pretrained_head(str(tmp_path / "model" / "lm"), XLNetPretrainer)
  assert lm.objective == "clm" and lm.backbone.config.attn_type == "uni"
  with pytest.raises(ValueError, match="needs attn_type uni"):
    PretrainingRun(tf.distribute.get_strategy(), XLNetConfig.preset("tiny", mem_len=16),
                   PretrainingOptions(model_dir=str(tmp_path / "other"),
                                      train_data=str(tmp_path / "data")))


@pytest.mark.slow
def test_cli_pretrains_a_clm_and_evaluates_it_with_longer_memory(tmp_path):
  out = tmp_path / "out"
  result = run_forked(
      [os.path.join(RUN, "pretrain.py"), "--objective=clm",
       f"--output_dir={out}", "--model_size=tiny", "--vocab_size=500", "--seq_len=16",
       "--bsz_per_host=4", "--train_steps=30", "--eval_batches=2", "--log_steps=10",
       # Transformer-XL's Table 5 switches: Shaw's encoding, the half loss.
       "--pos_encoding=shaw", "--clamp_len=24", "--loss_positions=half"],
      timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Held-out left-to-right LM loss:" in result.stdout
  saved = json.load(open(out / "model" / "lm" / "xlnet_config.json"))
  assert (saved["pos_encoding"], saved["clamp_len"]) == ("shaw", 24)
  results_path = tmp_path / "lm.json"
  evaluated = run_forked(
      [os.path.join(RUN, "evaluate_lm.py"), f"--output_dir={out}",
       "--eval_tgt_len=16", "--eval_mem_len=0,16,48", "--speed_lengths=32",
       "--speed_tgt_len=16", f"--results_json={results_path}"],
      timeout=600)
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  assert "| 48 | 64 |" in evaluated.stdout and "speed-up" in evaluated.stdout
  # Table 5's columns: trained with a memory of 128 (clm's layout) over segments of 16.
  assert "PPL init not evaluated (the training attention length, 144)" in evaluated.stdout
  tables = json.load(open(results_path))
  best = min(tables["evaluations"], key=lambda row: row["perplexity"])
  assert tables["table5"]["ppl_best"] == best["perplexity"]
  # RECL of a group (the same model twice here: the metric is tests/test_context_length.py's).
  recl = run_forked(
      [os.path.join(RUN, "evaluate_lm.py"), f"--output_dir={out}",
       f"--models={out},{out / 'model' / 'lm'}", "--recl_lengths=4,8,12", "--recl_tokens=20",
       "--eval_tgt_len=4", f"--recl_png={tmp_path / 'recl.png'}"],
      timeout=600)
  assert recl.returncode == 0, recl.stderr[-3000:]
  assert "RECL (r = 0.1, Delta = 4, 20 tokens):" in recl.stdout
  assert (tmp_path / "recl.png").read_bytes()[:4] == b"\x89PNG"
  for arguments, says in (([f"--models={out}"], "--models: RECL needs a group of at least two"),
                          ([f"--models={out},{out}", "--recl_r=0"], "--recl_r=0.0: must be in")):
    bad = run_forked([os.path.join(RUN, "evaluate_lm.py"),
                          f"--output_dir={out}", *arguments], timeout=600)
    assert bad.returncode == 1 and says in bad.stderr and "Traceback" not in bad.stderr
  assert [row["mem_len"] for row in tables["evaluations"]] == [0, 16, 48]
  assert all(math.isfinite(row["perplexity"]) for row in tables["evaluations"])
  assert len({row["tokens"] for row in tables["evaluations"]}) == 1
  short = run_forked(
      [os.path.join(RUN, "evaluate_lm.py"), f"--output_dir={out}",
       "--eval_tgt_len=100000", "--speed_lengths="],
      timeout=600)
  assert short.returncode != 0 and "eval_tgt_len=100000" in short.stderr
