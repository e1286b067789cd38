"""The objectives and Table 6's switches: masked LM against its definition, no leak of a masked
token to its own prediction, token-level vs span targets, memory off, next sentence, bytes; the
objective objects (what each states and refuses, the lookup, data from before the objectives,
a new objective as one object)."""

import dataclasses
import filecmp
import json
import shutil
import os
import random

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.inference.generation import generate
from xlnet_tf.heads import XLNetPretrainer
from xlnet_tf import objectives
from xlnet_tf.pretraining import recipes
from xlnet_tf.pretraining.data.examples import ExampleBuilder
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.pretraining.loop import PretrainingOptions, PretrainingRun
from xlnet_tf.objectives.masked_lm import (MASK_FRACTION, RANDOM_FRACTION, draw_replacements,
                                           expand_masked_lm)
from xlnet_tf.pretraining.data.records import load_record_info, pretraining_dataset
from xlnet_tf.pretraining.data.spans import sample_tokens, sample_word_spans
from xlnet_tf.pretraining.data.stage import create_pretraining_data
from xlnet_tf.text.tokenizer import XLNetTokenizer

SETTINGS = dict(seq_len=32, reuse_len=16, num_predict=5, bsz_per_host=4)


@pytest.fixture(scope="module")
def objective_data(corpus_files, sp_model, tmp_path_factory):
  """Records of each objective/switch from the same text and seed."""
  root = tmp_path_factory.mktemp("objectives")
  made = {}
  for name, extra in (("perm", {}), ("mlm", {"objective": "mlm"}),
                      ("mlm_tokens", {"objective": "mlm", "span_prediction": False}),
                      ("perm_tokens", {"span_prediction": False})):
    create_pretraining_data(corpus_files[:1], sp_model, str(root / name),
                            PretrainingDataConfig(**SETTINGS, **extra), seed=3, num_workers=1)
    made[name] = str(root / name)
  return made


def test_replacements_follow_bert_80_10_10(rng):
  original = rng.integers(10, 500, 200_000)
  ordinary = np.arange(10, 500)
  shown = draw_replacements(rng, original, mask_id=6, ordinary_ids=ordinary)
  masked = shown == 6
  kept = shown == original
  assert abs(masked.mean() - MASK_FRACTION) < 0.005
  # A random draw equals the original 1 time in 490: "kept" is 10% plus those.
  expected_kept = (1 - MASK_FRACTION - RANDOM_FRACTION) + RANDOM_FRACTION / len(ordinary)
  assert abs(kept.mean() - expected_kept) < 0.005
  assert np.isin(shown[~masked], ordinary).all()


@st.composite
def masked_examples(draw):
  batch, length, slots = draw(st.integers(1, 3)), draw(st.integers(2, 20)), draw(st.integers(1, 6))
  ids = np.array(draw(st.lists(st.integers(7, 99), min_size=batch * length,
                               max_size=batch * length))).reshape(batch, length)
  positions = np.full([batch, slots], -1)
  for row in range(batch):
    count = draw(st.integers(0, min(slots, length)))
    chosen = draw(st.permutations(range(length)))[:count]
    positions[row, :count] = chosen
  replacements = np.array(draw(st.lists(st.integers(0, 120), min_size=batch * slots,
                                        max_size=batch * slots))).reshape(batch, slots)
  return ids, positions, replacements


@settings(max_examples=60, deadline=None)
@given(masked_examples())
def test_masked_lm_expansion_follows_the_definition(example):
  ids, positions, replacements = example
  features = expand_masked_lm(tf.constant(ids, tf.int32), tf.constant(positions, tf.int32),
                              tf.constant(replacements, tf.int32))
  expected_input = ids.copy()
  for row, slots in enumerate(positions):
    for slot, position in enumerate(slots):
      if position >= 0:
        expected_input[row, position] = replacements[row, slot]
        assert features["target"][row, slot] == ids[row, position]
        assert features["target_mapping"][row, slot].numpy().argmax() == position
        assert features["target_mask"][row, slot] == 1
      else:
        assert not features["target_mapping"][row, slot].numpy().any()
        assert features["target"][row, slot] == 0 and features["target_mask"][row, slot] == 0
  np.testing.assert_array_equal(features["input_ids"], expected_input)
  assert "perm_mask" not in features


def test_mlm_examples_against_their_definition(objective_data, sp_model):
  tokenizer = XLNetTokenizer(sp_model)
  info = load_record_info(objective_data["mlm"])
  assert info["settings"]["objective"] == "mlm"
  originals = next(iter(pretraining_dataset(objective_data["perm"])))["input_ids"].numpy()
  shown_total, masked_total = 0, 0
  for batch in pretraining_dataset(objective_data["mlm"], repeat=False).take(20):
    shown = batch["input_ids"].numpy()
    positions = np.argmax(batch["target_mapping"].numpy(), axis=-1)
    valid = batch["target_mask"].numpy() > 0
    for row in range(len(shown)):
      targets = positions[row][valid[row]]
      assert len(set(targets.tolist())) == len(targets), "a position is predicted once"
      # Selected <sep>/<cls> are dropped from the targets (as the perm objective does).
      assert SETTINGS["num_predict"] - 3 <= len(targets) <= SETTINGS["num_predict"]
      truth = batch["target"].numpy()[row][valid[row]]
      # Functional tokens are never targets; the input differs from the truth only there.
      assert not np.isin(truth, [tokenizer.special_ids.sep, tokenizer.special_ids.cls]).any()
      others = np.setdiff1d(np.arange(shown.shape[1]), targets)
      assert not (shown[row, others] == tokenizer.special_ids.mask).any()
      shown_total += len(targets)
      masked_total += int((shown[row, targets] == tokenizer.special_ids.mask).sum())
  assert 0.65 < masked_total / shown_total < 0.92
  # Same text and seed, the other objective: the same stream.
  assert originals.shape == shown.shape


def test_a_masked_token_does_not_leak_into_its_own_prediction(objective_data):
  """Changing the true token under a replaced target changes nothing the model sees."""
  info = load_record_info(objective_data["mlm"])
  config = XLNetConfig(n_token=info["tokenizer"]["vocab_size"], n_layer=2, d_model=32,
                       n_head=4, d_head=8, d_inner=64, dropout=0.0, dropatt=0.0, mem_len=16,
                       reuse_len=16, bi_data=True)
  keras.utils.set_random_seed(0)
  model = XLNetPretrainer(XLNetModel(config), objective="mlm")
  batch = next(iter(pretraining_dataset(objective_data["mlm"])))
  mems = [tf.random.normal([4, 16, 32], seed=i) for i in range(2)]
  positions = np.argmax(batch["target_mapping"].numpy(), axis=-1)
  valid = batch["target_mask"].numpy() > 0
  replaced = valid & (batch["input_ids"].numpy()[np.arange(4)[:, None], positions] !=
                      batch["target"].numpy())
  assert replaced.sum() > 10
  # Rebuild the inputs from stored ids whose truth under the replaced targets is changed.
  stored = batch["input_ids"].numpy().copy()
  for row, slot in zip(*np.nonzero(valid)):
    stored[row, positions[row, slot]] = batch["target"].numpy()[row, slot]  # the original
  altered = stored.copy()
  for row, slot in zip(*np.nonzero(replaced)):
    altered[row, positions[row, slot]] = (stored[row, positions[row, slot]] + 1) % 400 + 7
  shown_ids = np.where(valid, batch["input_ids"].numpy()[np.arange(4)[:, None], positions], 0)
  logits = []
  for ids in (stored, altered):
    features = expand_masked_lm(tf.constant(ids), tf.constant(np.where(valid, positions, -1)),
                                tf.constant(shown_ids))
    inputs = dict(features, segment_ids=batch["segment_ids"], mems=mems)
    logits.append(model(inputs)["logits"].numpy())
  np.testing.assert_array_equal(logits[0], logits[1])
  # ... while a change the model may see (a context token) does change them.
  context = np.ones_like(stored, bool)
  context[np.arange(4)[:, None], positions] = False
  row, column = np.argwhere(context)[3]
  visible = stored.copy()
  visible[row, column] = (visible[row, column] + 1) % 400 + 7
  features = expand_masked_lm(tf.constant(visible), tf.constant(np.where(valid, positions, -1)),
                              tf.constant(shown_ids))
  moved = model(dict(features, segment_ids=batch["segment_ids"], mems=mems))["logits"].numpy()
  assert np.abs(moved[row] - logits[0][row]).max() > 1e-4


@settings(max_examples=40, deadline=None)
@given(st.integers(8, 80), st.floats(0.05, 0.5), st.integers(0, 10 ** 6))
def test_token_level_targets_are_single_uniform_tokens(length, fraction, seed):
  goal = max(1, int(length * fraction))
  selected = sample_tokens(random.Random(seed), length, goal)
  assert selected.sum() == goal


def test_token_level_switch_changes_the_targets(objective_data):
  """Span targets come in runs of whole words; token-level ones are independent tokens: the
  chance that a target's right neighbour is a target is then the base rate."""
  def neighbour_rate(directory):
    together, total = 0, 0
    for batch in pretraining_dataset(directory, repeat=False).take(40):
      is_target = batch["target_mapping"].numpy().max(axis=1) > 0  # [B, T]
      together += (is_target[:, :-1] & is_target[:, 1:]).sum()
      total += is_target[:, :-1].sum()
    return together / total
  span_rate, token_rate = neighbour_rate(objective_data["perm"]), neighbour_rate(
      objective_data["perm_tokens"])
  print(f"neighbour rates: spans {span_rate:.3f}, tokens {token_rate:.3f}")
  assert token_rate < 3 / 16 * 1.5  # about the base rate num_predict / part length
  assert span_rate > 1.5 * token_rate
  # The word-span sampler on the same goal gives runs; the token sampler does not.
  draw = random.Random(0)
  spans = sample_word_spans(draw, np.ones(64, bool), 16, 6, 1)
  assert spans.sum() == 16


def test_reader_refuses_another_objective(objective_data):
  with pytest.raises(ValueError, match=r"objective: data 'mlm', run 'perm'"):
    pretraining_dataset(objective_data["mlm"], objective="perm")


def test_same_seed_same_mlm_bytes(corpus_files, sp_model, objective_data, tmp_path):
  for workers in (1, 2):
    directory = tmp_path / f"w{workers}"
    create_pretraining_data(corpus_files[:1], sp_model, str(directory),
                            PretrainingDataConfig(**SETTINGS, objective="mlm"), seed=3,
                            num_workers=workers)
    for name in os.listdir(objective_data["mlm"]):
      if name.endswith(".tfrecords"):
        assert filecmp.cmp(os.path.join(objective_data["mlm"], name), directory / name,
                           shallow=False)


def _run(data, model_dir, **overrides):
  info = load_record_info(data)
  config = XLNetConfig(n_token=info["tokenizer"]["vocab_size"], n_layer=2, d_model=32,
                       n_head=4, d_head=8, d_inner=64, dropout=0.0, dropatt=0.0,
                       mem_len=overrides.pop("mem_len", 16), reuse_len=16, bi_data=True)
  keras.utils.set_random_seed(0)
  options = dict(model_dir=str(model_dir), train_data=data, valid_data=data, train_steps=4,
                 learning_rate=1e-3,
                 warmup_steps=0, log_steps=1, save_steps=100, summaries=False)
  options.update(overrides)
  return PretrainingRun(tf.distribute.get_strategy(), config, PretrainingOptions(**options))


def test_memory_off_means_no_memory(objective_data, tmp_path):
  """With mem_len 0 the second batch's loss equals its loss read alone; with memory it does
  not."""
  data = objective_data["mlm"]
  for mem_len, carried in ((0, False), (16, True)):
    run = _run(data, tmp_path / f"m{mem_len}", mem_len=mem_len, objective="mlm")
    batches = list(pretraining_dataset(data, repeat=False).take(2))
    inputs = run.steps.model_inputs(batches[1], run.memory.zeros())
    assert ("mems" in inputs) == carried
    _, mems = run.steps.forward(batches[0], run.memory.zeros())
    after_first, _ = run.steps.forward(batches[1], mems)
    alone, _ = run.steps.forward(batches[1], run.memory.zeros())
    # rtol=0: the memory moves an untrained model's loss sum (~120) by ~1e-3 only.
    same = np.allclose(after_first.numpy(), alone.numpy(), rtol=0, atol=1e-5)
    assert same != carried


def test_next_sentence_loss_is_added(objective_data, tmp_path):
  run = _run(objective_data["perm"], tmp_path / "ns", next_sentence=True)
  batch = next(iter(pretraining_dataset(objective_data["perm"])))
  outputs = run.model(run.steps.model_inputs(batch, run.memory.zeros()))
  lm_sum, lm_count, ns_sum, ns_count = [float(v) for v in
                                        run.model.pretraining_loss_sums(outputs, batch)]
  logits = outputs["next_sentence_logits"].numpy().astype(np.float64)
  labels = batch["label"].numpy()
  log_probabilities = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  assert ns_sum == pytest.approx(-log_probabilities[np.arange(4), labels].sum(), rel=1e-5)
  assert ns_count == 4
  assert float(run.model.pretraining_loss(outputs, batch)) == pytest.approx(
      lm_sum / lm_count + ns_sum / ns_count, rel=1e-5)
  assert run.train()["step"] == 4


def test_mlm_trains_and_the_run_refuses_other_data(objective_data, tmp_path):
  run = _run(objective_data["mlm"], tmp_path / "mlm", objective="mlm", train_steps=30,
             learning_rate=1e-2)
  before = run.evaluate(batches=2)["loss"]
  run.train()
  assert run.evaluate(batches=2)["loss"] < before - 0.5
  with pytest.raises(ValueError, match="objective 'mlm', this run trains 'perm'"):
    _run(objective_data["mlm"], tmp_path / "x", objective="perm")


# ---- the objective objects ----------------------------------------------------------------

def test_each_objective_states_its_attention_stream_and_layout():
  facts = {name: (o.attn_type, o.stream, o.predicts_next_token, o.consecutive_segments,
                  o.needs_mask_id, [f.name for f in o.stored_features])
           for name, o in objectives.OBJECTIVES.items()}
  pair = ["input_ids", "segment_ids", "target_positions"]
  assert facts == {
      "perm": ("bi", "query", True, False, False, pair + ["ranks"]),
      "mlm": ("bi", "content", False, False, True, pair + ["replacements"]),
      "clm": ("uni", "content", True, True, False, ["input_ids"])}
  assert objectives.NAMES == ("perm", "mlm", "clm") and objectives.DEFAULT.name == "perm"
  assert [o.display_name for o in objectives.OBJECTIVES.values()] == [
      "permutation-LM", "masked-LM", "left-to-right LM"]
  assert recipes.recipe_for("clm", False).data.seq_len == 32
  assert recipes.recipe_for("perm", False) == recipes.MAIN_JOB
  assert recipes.recipe_for("mlm", False) == recipes.MAIN_JOB.replace(objective="mlm")


def test_lookup_names_the_argument_and_the_valid_names():
  assert objectives.named("mlm") is objectives.MASKED_LM
  for bad in ("plm", None, 3):
    with pytest.raises(UserInputError, match=r"^objective must be one of 'perm', 'mlm', 'clm'; "
                       f"got {bad!r}$"):
      objectives.named(bad)
  with pytest.raises(UserInputError, match=r"PretrainingDataConfig.objective must be one of"):
    PretrainingDataConfig(objective="PERM")
  with pytest.raises(ValueError, match=r"objective must be one of 'perm', 'mlm', 'clm'"):
    XLNetPretrainer(XLNetModel(XLNetConfig.preset("tiny")), objective="bert")


def test_each_objective_refuses_what_it_should(sp_model):
  # clm: consecutive segments (reuse_len 0, no bi_data), a 'uni' backbone; perm and mlm run on
  # either backbone, as before.
  with pytest.raises(UserInputError, match=r"reuse_len must be 0 for objective clm.*; got 8"):
    PretrainingDataConfig(seq_len=16, reuse_len=8, bi_data=False, objective="clm")
  with pytest.raises(UserInputError, match=r"bi_data must be False for objective clm"):
    PretrainingDataConfig(seq_len=16, reuse_len=0, bsz_per_host=4, objective="clm")
  PretrainingDataConfig(seq_len=16, reuse_len=0, bsz_per_host=4, bi_data=False, objective="clm")
  with pytest.raises(UserInputError, match=r"objective 'clm' needs a backbone with attn_type "
                     r"'uni'; got attn_type 'bi'"):
    objectives.LEFT_TO_RIGHT_LM.check_backbone("bi")
  for objective in (objectives.PERMUTATION_LM, objectives.MASKED_LM):
    objective.check_backbone("uni")
    objective.check_backbone("bi")
  # The A/B layout's rules hold for perm and mlm, not for clm's segments.
  for name in ("perm", "mlm"):
    with pytest.raises(UserInputError, match="reuse_len must be in"):
      PretrainingDataConfig(seq_len=16, reuse_len=14, objective=name)
  # mlm: a <mask> to show; a model that cannot generate.
  tokenizer = XLNetTokenizer(sp_model)
  with pytest.raises(UserInputError, match="objective mlm needs a <mask> symbol"):
    ExampleBuilder(PretrainingDataConfig(**SETTINGS, objective="mlm"), tokenizer.word_start,
                   tokenizer.special_ids.sep, tokenizer.special_ids.cls, None)
  masked = XLNetPretrainer(XLNetModel(XLNetConfig.preset("tiny", bi_data=False)), objective="mlm")
  with pytest.raises(UserInputError, match=r"trained to predict the next token \(objective "
                     r"'perm' or 'clm'\); got objective 'mlm'"):
    generate(masked, np.array([[7, 8, 9]]), 1)


def test_record_info_from_before_the_objectives_reads_as_perm(objective_data, tmp_path):
  """Data written before record_info.json named the objective (and span_prediction) read as
  what they are: permutation-LM data with span targets."""
  old = tmp_path / "old"
  shutil.copytree(objective_data["perm"], old)
  info_path = old / "record_info.json"
  info = json.loads(info_path.read_text())
  del info["settings"]["objective"], info["settings"]["span_prediction"]
  info_path.write_text(json.dumps(info))
  assert load_record_info(str(old))["settings"]["objective"] == "perm"
  old_batch = next(iter(pretraining_dataset(str(old), objective="perm")))
  new_batch = next(iter(pretraining_dataset(objective_data["perm"])))
  assert sorted(old_batch) == sorted(new_batch) and "perm_mask" in old_batch
  for name in new_batch:
    np.testing.assert_array_equal(old_batch[name], new_batch[name])


def test_a_new_objective_is_one_object(objective_data, corpus_files, sp_model, tmp_path,
                                       monkeypatch):
  """Registered in a test only: perm under another name makes, reads and trains on its data
  with nothing else changed, and writes the same examples as perm."""
  renamed = dataclasses.replace(objectives.PERMUTATION_LM, name="perm_again",
                                display_name="permutation-LM again")
  monkeypatch.setitem(objectives.OBJECTIVES, "perm_again", renamed)
  directory = tmp_path / "again"
  create_pretraining_data(corpus_files[:1], sp_model, str(directory),
                          PretrainingDataConfig(**SETTINGS, objective="perm_again"), seed=3,
                          num_workers=1)
  name = "train-0-00000.tfrecords"
  assert filecmp.cmp(os.path.join(objective_data["perm"], name), directory / name,
                     shallow=False)
  batch = next(iter(pretraining_dataset(str(directory), objective="perm_again")))
  assert "perm_mask" in batch
  run = _run(str(directory), tmp_path / "model", objective="perm_again")
  assert run.model.lm_objective is renamed
  outputs = run.model(run.steps.model_inputs(batch, run.memory.zeros()))
  assert outputs["logits"].shape == (4, SETTINGS["num_predict"], run.config.n_token)
