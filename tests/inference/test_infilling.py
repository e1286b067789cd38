"""Infilling (xlnet_tf.inference.fill): the one-pass span probability against a float64 chain of
one-blank steps, cached against recomputed fills, `independent` against one forward pass, the
confidence order on a case with a known answer, the mlm and clm paths, sampling seeds, bad
input, score_candidates and run/infill.py."""

import json
import keras
import numpy as np
import pytest

from tests.cli_output import run_tool
from tests.xlnet_reference import model_weights_by_original_name, xlnet_forward
from xlnet_tf import XLNetConfig, XLNetModel, XLNetTokenizer, checkpoints
from xlnet_tf.inference import infilling
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.heads import XLNetPretrainer

N_TOKEN = 200
CLS, SEP, MASK = infilling.DEFAULT_CLS_ID, infilling.DEFAULT_SEP_ID, infilling.DEFAULT_MASK_ID


def tiny_lm(objective, seed=0):
  """Weights drawn wide (init_std 0.3) so that every blank moves the predictions."""
  keras.utils.set_random_seed(seed)
  config = XLNetConfig.preset("tiny", n_token=N_TOKEN, bi_data=False, dropout=0.0,
                              dropatt=0.0, init_std=0.3,
                              attn_type="uni" if objective == "clm" else "bi")
  return XLNetPretrainer(XLNetModel(config), objective=objective)


@pytest.fixture(scope="module")
def lms():
  return {objective: tiny_lm(objective) for objective in ("perm", "mlm", "clm")}


@pytest.fixture(scope="module")
def texts():
  """Three texts of 12 tokens ending in <sep> <cls>, two segments, the last left-padded by 3;
  blanks at the start, in the middle (adjacent and apart) and just before <sep>."""
  rng = np.random.default_rng(7)
  ids = rng.integers(10, N_TOKEN, size=(3, 12)).astype(np.int32)
  ids[:, -2:] = [SEP, CLS]
  segments = np.zeros_like(ids)
  segments[:, 5:] = 1
  segments[:, -1] = 2
  real = np.ones(ids.shape, np.float32)
  real[2, :3] = 0
  blanks = np.zeros(ids.shape, np.float32)
  blanks[0, [0, 1, 6]] = 1
  blanks[1, [2, 4, 5, 9]] = 1
  blanks[2, [3, 7]] = 1
  return dict(input_ids=ids, segment_ids=segments, input_mask=real, fill_mask=blanks)


def reference_log_prob(model, texts, row, order_of_blanks):
  """log p(blanks of `row` | the rest) as a chain of float64 forward passes (tests'
  xlnet_reference), one per blank: the blank's query row sees the context and the blanks
  before it in the order; each of those blanks' content sees the context and its own
  predecessors (the factorization order context..., b1, b2, ...)."""
  config = model.backbone.config
  weights = model_weights_by_original_name(model.backbone)
  embedding = weights["model/transformer/word_embedding/lookup_table"]
  bias = model.lm_bias.numpy().astype(np.float64)
  ids = texts["input_ids"][row:row + 1]
  length = ids.shape[1]
  total = 0.0
  for step, target in enumerate(order_of_blanks):
    earlier = order_of_blanks[:step]
    perm_mask = np.zeros([1, length, length], np.float32)
    for i in range(length):
      for j in np.flatnonzero(texts["fill_mask"][row]):
        sees = j in earlier and (i in earlier and earlier.index(j) <= earlier.index(i)
                                 or i == target)
        perm_mask[0, i, j] = 0 if sees else 1
    mapping = np.zeros([1, 1, length], np.float32)
    mapping[0, 0, target] = 1
    query = xlnet_forward(weights, config, ids, texts["segment_ids"][row:row + 1],
                          texts["input_mask"][row:row + 1], perm_mask, mapping)["query_output"]
    logits = query[0, 0] @ embedding.T + bias
    total += logits[ids[0, target]] - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
  return total


@pytest.mark.parametrize("order", ["left_to_right", "right_to_left", "random", "independent"])
def test_perm_span_log_prob_is_the_exact_chain_rule_in_one_pass(order, lms, texts):
  model = lms["perm"]
  one_pass = infilling.span_log_prob(model, **texts, order=order, seed=3).numpy()
  rng = np.random.default_rng(3)  # the random order's draws, row by row, as documented
  for row in range(3):
    blanks = np.flatnonzero(texts["fill_mask"][row]).tolist()
    chain = {"left_to_right": blanks, "right_to_left": blanks[::-1],
             "random": [blanks[i] for i in rng.permutation(len(blanks))]}.get(order)
    if chain is None:  # independent: each blank from the context alone
      expected = sum(reference_log_prob(model, texts, row, [blank]) for blank in blanks)
    else:
      expected = reference_log_prob(model, texts, row, chain)
    np.testing.assert_allclose(one_pass[row], expected, rtol=1e-4, atol=1e-3)


def test_one_pass_equals_teacher_forced_steps_in_every_order(lms, texts):
  """The one-pass mask against the step loop (`fill`'s machinery) conditioning on the true
  tokens; confidence, which has no fixed order, is scored by that loop."""
  model = lms["perm"]
  for order in ("left_to_right", "right_to_left", "random"):
    text = infilling._checked_text(model, texts["input_ids"], texts["fill_mask"],
                                   texts["input_mask"], texts["segment_ids"], order, MASK,
                                   (CLS, SEP), "test")
    for steps in (infilling._steps_for(model, text, True),
                  infilling._steps_for(model, text, False)):
      _, log_probs = infilling._run_order(steps, text, order,
                                          infilling._Sampler.true_tokens(text), seed=5)
      np.testing.assert_allclose(
          log_probs.sum(axis=1),
          infilling.span_log_prob(model, **texts, order=order, seed=5).numpy(), atol=2e-4)


@pytest.mark.parametrize("order", infilling.ORDERS)
def test_cached_fills_equal_recomputed_fills(order, lms, texts):
  model = lms["perm"]
  for temperature in (0.0, 1.0):
    cached, recomputed = (infilling.fill(model, **texts, order=order, temperature=temperature,
                                         seed=11, use_cache=use_cache).numpy()
                          for use_cache in (True, False))
    np.testing.assert_array_equal(cached, recomputed)
    unchanged = texts["fill_mask"] == 0
    np.testing.assert_array_equal(cached[unchanged], texts["input_ids"][unchanged])


def test_independent_is_one_forward_pass(lms, texts):
  model = lms["perm"]
  length = texts["input_ids"].shape[1]
  perm_mask = np.broadcast_to(texts["fill_mask"][:, None, :], [3, length, length])
  slots = int(texts["fill_mask"].sum(axis=1).max())
  mapping = np.zeros([3, slots, length], np.float32)
  for row in range(3):
    for slot, position in enumerate(np.flatnonzero(texts["fill_mask"][row])):
      mapping[row, slot, position] = 1
  inputs = {key: texts[key] for key in ("input_ids", "segment_ids", "input_mask")}
  logits = model({**inputs, "perm_mask": perm_mask, "target_mapping": mapping})["logits"]
  logits = logits.numpy()
  filled = infilling.fill(model, **texts, order="independent").numpy()
  for row in range(3):
    positions = np.flatnonzero(texts["fill_mask"][row])
    np.testing.assert_array_equal(filled[row, positions],
                                  logits[row, :len(positions)].argmax(-1))


class _KnownConfidence:
  """A stand-in for the model steps: blank slot s is predicted with probability
  CONFIDENCE[s] for token 100 + s, whatever is filled: confidence fills slots 2, 0, 1."""
  CONFIDENCE = [0.8, 0.6, 0.9]

  def __init__(self):
    self.calls = []

  def __call__(self, ids, ranks, query_positions, query_valid, new_positions, has_new):
    self.calls.append(query_valid.copy())
    logits = np.full(query_positions.shape + (N_TOKEN,), -20.0)
    for slot in range(query_positions.shape[1]):
      logits[:, slot, 100 + slot] = np.log(self.CONFIDENCE[slot])
      logits[:, slot, 0] = np.log(1 - self.CONFIDENCE[slot])  # the rest of the probability
    return logits


def test_confidence_fills_the_surest_blank_first():
  model = tiny_lm("perm")
  ids = np.array([[20, 21, 22, 23, 24, SEP, CLS]], np.int32)
  blanks = np.array([[0, 1, 0, 1, 1, 0, 0]], np.float32)
  text = infilling._checked_text(model, ids, blanks, None, None, "confidence", MASK,
                                 (CLS, SEP), "test")
  steps = _KnownConfidence()
  filled, _ = infilling._run_order(steps, text, "confidence",
                                   infilling._Sampler(0.0, 0, 1.0, 0), seed=0)
  np.testing.assert_array_equal(filled[0], [20, 100, 22, 101, 102, SEP, CLS])
  # Open slots per step: all three, then without slot 2, then only slot 1.
  np.testing.assert_array_equal(np.array(steps.calls)[:, 0], [[1, 1, 1], [1, 1, 0], [0, 1, 0]])


def test_mlm_fills_mask_predict_style_and_scores_each_blank_from_the_context(lms, texts):
  model = lms["mlm"]
  masked = np.where(texts["fill_mask"] > 0, MASK, texts["input_ids"])
  inputs = {"segment_ids": texts["segment_ids"], "input_mask": texts["input_mask"]}
  length = masked.shape[1]

  def content_logits(ids, positions):
    mapping = np.zeros([3, len(positions[0]), length], np.float32)
    for row, row_positions in enumerate(positions):
      mapping[row, np.arange(len(row_positions)), row_positions] = 1
    return model({**inputs, "input_ids": ids, "target_mapping": mapping})["logits"].numpy()

  # Left to right, one blank per pass, the others still <mask>: by hand.
  expected = masked.copy()
  counts = texts["fill_mask"].sum(axis=1).astype(int)
  for step in range(counts.max()):
    positions = [[np.flatnonzero(texts["fill_mask"][row])[min(step, counts[row] - 1)]]
                 for row in range(3)]
    tokens = content_logits(expected, positions)[:, 0].argmax(-1)
    for row in range(3):
      if step < counts[row]:
        expected[row, positions[row][0]] = tokens[row]
  np.testing.assert_array_equal(infilling.fill(model, **texts).numpy(), expected)
  # span_log_prob: each blank given the context with every blank masked, in every order.
  true = texts["input_ids"]
  for order in ("left_to_right", "independent"):
    scores = infilling.span_log_prob(model, **texts, order=order).numpy()
    for row in range(3):
      positions = np.flatnonzero(texts["fill_mask"][row])
      logits = content_logits(masked, [positions] * 3)[row].astype(np.float64)
      log_softmax = logits - logits.max(-1, keepdims=True)
      log_softmax -= np.log(np.exp(log_softmax).sum(-1, keepdims=True))
      np.testing.assert_allclose(scores[row], log_softmax[np.arange(len(positions)),
                                                          true[row, positions]].sum(),
                                 rtol=1e-5, atol=1e-4)


def test_clm_reads_the_left_context_only(lms, texts):
  model = lms["clm"]
  texts = dict(texts, fill_mask=texts["fill_mask"].copy())
  texts["fill_mask"][0, 0] = 0  # clm cannot predict a row's first token (nor row 2's at 3)
  texts["fill_mask"][2, [3, 4]] = [0, 1]
  inputs = {key: texts[key] for key in ("input_ids", "segment_ids", "input_mask")}
  logits = model(inputs)["logits"].numpy().astype(np.float64)  # position p predicts p + 1
  log_softmax = logits - logits.max(-1, keepdims=True)
  log_softmax -= np.log(np.exp(log_softmax).sum(-1, keepdims=True))
  scores = infilling.span_log_prob(model, **texts).numpy()
  for row in range(3):
    positions = np.flatnonzero(texts["fill_mask"][row])
    np.testing.assert_allclose(
        scores[row], log_softmax[row, positions - 1, texts["input_ids"][row, positions]].sum(),
        rtol=1e-5, atol=1e-4)
  filled = infilling.fill(model, **texts).numpy()
  expected = texts["input_ids"].copy()
  for row in range(3):
    for position in np.flatnonzero(texts["fill_mask"][row]):  # left to right, by hand
      step_inputs = {key: value[row:row + 1] for key, value in inputs.items()}
      step_inputs["input_ids"] = expected[row:row + 1]
      expected[row, position] = model(step_inputs)["logits"][0, position - 1].numpy().argmax()
  np.testing.assert_array_equal(filled, expected)
  with pytest.raises(UserInputError, match="fill: order must be 'left_to_right'"):
    infilling.fill(model, **texts, order="right_to_left")


def test_sampling_is_reproducible_for_a_seed(lms, texts):
  model = lms["perm"]
  draws = [infilling.fill(model, **texts, temperature=1.5, seed=seed).numpy()
           for seed in (4, 4, 5)]
  np.testing.assert_array_equal(draws[0], draws[1])
  assert (draws[0] != draws[2]).any()


def _with(texts, **changes):
  changed = {key: np.array(value) for key, value in texts.items()}
  for key, (row, position, value) in changes.items():
    changed[key][row, position] = value
  return changed


BAD_INPUTS = [
    (lambda t: dict(t, fill_mask=np.zeros_like(t["fill_mask"])), {}, "fill_mask must be a "
     "blank"),
    (lambda t: dict(t, fill_mask=t["input_mask"]), {}, "not all blanks"),
    (lambda t: _with(t, fill_mask=(2, 0, 1)), {}, "0 on padding"),
    (lambda t: _with(t, fill_mask=(1, 11, 1)), {}, "<cls>/<sep>"),
    (lambda t: _with(t, fill_mask=(1, 10, 1)), {}, "<cls>/<sep>"),
    (lambda t: t, dict(order="backwards"), "order must be one of"),
    (lambda t: t, dict(temperature=-0.5), "fill: temperature"),
    (lambda t: dict(t, fill_mask=t["fill_mask"][:, :5]), {}, "fill_mask must be of shape"),
    (lambda t: _with(t, input_ids=(0, 3, N_TOKEN)), {}, "fill: input_ids"),
]


@pytest.mark.parametrize("make, arguments, message", BAD_INPUTS)
def test_bad_input_names_the_argument(make, arguments, message, lms, texts):
  with pytest.raises(UserInputError, match=message):
    infilling.fill(lms["perm"], **make(texts), **arguments)


def test_models_that_cannot_fill_are_refused(lms, texts):
  with pytest.raises(UserInputError, match="fill: pretrainer"):
    infilling.fill(lms["perm"].backbone, **texts)
  with pytest.raises(UserInputError, match="first token"):
    infilling.fill(lms["clm"], **texts)  # row 0 has a blank at position 0
  keras.utils.set_random_seed(0)
  bi_data = XLNetPretrainer(XLNetModel(XLNetConfig.preset("tiny", n_token=N_TOKEN,
                                                         bi_data=True)))
  with pytest.raises(UserInputError, match="bi_data"):
    infilling.span_log_prob(bi_data, **texts)


def test_score_candidates_ranks_by_span_log_prob(sp_model):
  keras.utils.set_random_seed(0)
  model = XLNetPretrainer(XLNetModel(XLNetConfig.preset("tiny", n_token=1000, bi_data=False,
                                                        init_std=0.3)))
  tokenizer = XLNetTokenizer(sp_model)
  candidates = ["break", "continue", "the return value"]
  ranked = infilling.score_candidates(model, tokenizer, "Use ___ to leave a loop.", candidates)
  per_piece = dict(infilling.score_candidates(model, tokenizer, "Use ___ to leave a loop.",
                                              candidates, per_piece=True))
  assert sorted(candidate for candidate, _ in ranked) == sorted(candidates)
  assert [score for _, score in ranked] == sorted((score for _, score in ranked), reverse=True)
  for candidate, score in ranked:  # each candidate alone, packed by hand
    pieces = tokenizer.encode(candidate)
    ids = tokenizer.encode("Use ") + pieces + tokenizer.encode(" to leave a loop.")
    start = len(tokenizer.encode("Use "))
    blanks = np.zeros([1, len(ids) + 2], np.float32)
    blanks[0, start:start + len(pieces)] = 1
    alone = infilling.span_log_prob(
        model, np.array([ids + [tokenizer.special_ids.sep, tokenizer.special_ids.cls]]),
        blanks, segment_ids=np.array([[0] * (len(ids) + 1) + [2]])).numpy()[0]
    assert score == pytest.approx(alone, abs=1e-3)
    assert per_piece[candidate] == pytest.approx(score / len(pieces), abs=1e-3)
  with pytest.raises(UserInputError, match="exactly one blank"):
    infilling.score_candidates(model, tokenizer, "no blank here", candidates)


def test_cli_fills_blanks_and_ranks_candidates(sp_model, tmp_path):
  keras.utils.set_random_seed(0)
  model = XLNetPretrainer(XLNetModel(XLNetConfig.preset("tiny", n_token=1000, bi_data=False)))
  model({"input_ids": np.ones([1, 4], np.int32), "perm_mask": np.zeros([1, 4, 4], np.float32),
         "target_mapping": np.eye(4, dtype=np.float32)[None, :1]})
  model_dir = str(tmp_path / "lm")
  checkpoints.save_pretrained(model, model_dir)
  common = (f"--model_dir={model_dir}", f"--sp_path={sp_model}")
  result = run_tool("run/infill.py", *common, "--text=The <mask> <mask> returns a list.",
                    "--text=Use ___ to leave a loop.", "--blank_pieces=2", "--order=confidence")
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.count("filled: ") == 2
  filled_lines = [line for line in result.stdout.splitlines() if line.startswith("filled: ")]
  assert filled_lines[0].startswith("filled: The [") and "returns a list." in filled_lines[0]
  ranked = run_tool("run/infill.py", *common, "--text=Use ___ to leave a loop.",
                    "--candidates=break,continue")
  assert ranked.returncode == 0 and "break" in ranked.stdout and "continue" in ranked.stdout
  # The intrinsic evaluation on held-out text: one sentence a line.
  held_out = tmp_path / "held_out.txt"
  held_out.write_text("Use the break statement to leave the innermost loop.\n"
                      "The continue statement starts the next cycle of the loop.\n"
                      "A return statement leaves the current function call.\n"
                      "Lists are mutable sequences of arbitrary objects.\n")
  evaluated = run_tool("run/infill.py", *common, "--evaluate", f"--evaluate_glob={held_out}",
                       "--examples=3", "--distractors=1",
                       f"--results_json={tmp_path / 'scores.json'}")
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  scores = json.loads((tmp_path / "scores.json").read_text())
  assert sorted(scores) == ["1", "2", "3", "4"]
  assert set(scores["2"]["infilling"]) == set(infilling.ORDERS)
  assert scores["1"]["examples"] == 3 and 0 <= scores["1"]["cloze"]["accuracy"] <= 1
  assert f"| {model_dir} | 4 | " in evaluated.stdout
  for arguments, named in ((["--evaluate", f"--evaluate_glob={tmp_path}/none*.txt"],
                            "none*.txt"),
                           (["--evaluate", "--examples=0"], "--examples"),
                           (["--text=no blank"], "has no blank"),
                           (["--order=sideways"], "--order"),
                           (["--blank_pieces=0"], "--blank_pieces"),
                           (["--temperature=-1"], "fill: temperature")):
    bad = run_tool("run/infill.py", *common, *arguments)
    assert bad.returncode == 1 and named in bad.stderr, bad.stderr[-2000:]
    assert "Traceback" not in bad.stderr
