"""Generation (xlnet_tf.inference.generate): cached steps against recomputing everything and against
one independent forward pass over the generated text, for 'uni' and 'bi' (XLNet) models with
left-padded prompts of different lengths; sampling's seed; stop tokens; bad input;
run/generate.py. The sampling filters: test_sampling.py."""

import keras
import numpy as np
import pytest

from tests.cli_output import run_tool
from xlnet_tf import XLNetConfig, XLNetModel, checkpoints
from xlnet_tf.inference import generation
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.heads import XLNetPretrainer
from xlnet_tf.text.tokenizer import XLNetTokenizer

N_TOKEN = 200
NEW = 10
INT8_NEW = 24  # run/generate.py --quantize=int8: enough tokens for int8 and float to part


def tiny_lm(attn_type, seed=0, **overrides):
  """Weights drawn wide (init_std 0.3) so that the context moves the predictions."""
  keras.utils.set_random_seed(seed)
  config = XLNetConfig.preset("tiny", n_token=N_TOKEN, attn_type=attn_type, bi_data=False,
                              dropout=0.0, dropatt=0.0, init_std=0.3, **overrides)
  return XLNetPretrainer(XLNetModel(config), objective="clm" if attn_type == "uni" else "perm")


@pytest.fixture(scope="module")
def lms():
  """One tiny LM per attention type, shared: generate() keeps a model's compiled steps, so the
  tests that run the same settings compile them once."""
  return {attn_type: tiny_lm(attn_type) for attn_type in ("uni", "bi")}


def prompts(rng):
  """Three prompts of lengths 9, 6 and 3, left-padded to 9."""
  ids = rng.integers(10, N_TOKEN, size=(3, 9)).astype(np.int32)
  lengths = [9, 6, 3]
  return generation.left_padded([ids[row, 9 - n:] for row, n in enumerate(lengths)])


def reference_next_token_logits(model, sequence, mask, first):
  """Logits [B, S - first, V] for positions first..S-1 of `sequence` [B, S], each from what
  precedes it only, in ONE forward pass (no generation code): 'uni' reads the content stream
  one position earlier; 'bi' puts the query stream at every position with the left-to-right
  factorization order (position i attends j <= i, its query stream j < i)."""
  backbone = model.backbone
  length = sequence.shape[1]
  inputs = {"input_ids": sequence, "input_mask": mask}
  if backbone.config.attn_type == "uni":
    hidden = backbone(inputs)["sequence_output"][:, first - 1:length - 1]
  else:
    position = np.arange(length)
    inputs["perm_mask"] = np.broadcast_to(
        (position[None, :] >= position[:, None]).astype(np.float32), [len(sequence), length,
                                                                     length])
    inputs["target_mapping"] = np.broadcast_to(
        np.eye(length, dtype=np.float32)[first:], [len(sequence), length - first, length])
    hidden = backbone(inputs)["query_output"]
  return model.lm_logits(hidden).numpy()


@pytest.mark.parametrize("attn_type", ["uni", "bi"])
def test_greedy_with_cache_equals_recomputing_and_one_forward_pass(attn_type, rng, lms):
  model = lms[attn_type]
  input_ids, input_mask = prompts(rng)
  cached = generation.generate(model, input_ids, NEW, input_mask=input_mask).numpy()
  recomputed = generation.generate(model, input_ids, NEW, input_mask=input_mask,
                                   use_cache=False).numpy()
  assert cached.shape == (3, 9 + NEW) and cached.dtype == np.int32
  np.testing.assert_array_equal(cached[:, :9], input_ids)
  np.testing.assert_array_equal(cached, recomputed)
  assert len(np.unique(cached[:, 9:])) >= 4  # not one repeated token: the test can fail
  mask = np.concatenate([input_mask, np.ones([3, NEW], np.float32)], axis=1)
  logits = reference_next_token_logits(model, cached, mask, first=9)
  np.testing.assert_array_equal(cached[:, 9:], logits.argmax(-1))


def test_the_default_compiles_a_float32_models_steps_not_its_prompt_nor_int8_steps(
    rng, lms, monkeypatch):
  """jit_compile=None: XLA for a float32 model's cached steps (the prompt without it), for
  every call without the cache; an int8 model's cached steps on the graph executor (their
  float products of the integers). Either way the tokens are the graph executor's."""
  made = []
  for steps in (generation.CachedSteps, generation.RecomputedSteps):
    def recording(*args, steps=steps):
      made.append((steps.__name__, args[-2:]))
      return steps(*args)
    monkeypatch.setattr(generation, steps.__name__, recording)
  input_ids, input_mask = prompts(rng)
  quantized = tiny_lm("bi")
  quantized.quantize("int8")
  outputs = [generation.generate(model, input_ids, NEW, input_mask=input_mask, **options).numpy()
             for model in (lms["bi"], quantized)
             for options in ({}, {"jit_compile": False}, {"use_cache": False})]
  assert made == [("CachedSteps", (False, True)), ("CachedSteps", (False, False)),
                  ("RecomputedSteps", (True, True))] + [
                  ("CachedSteps", (False, False)), ("CachedSteps", (False, False)),
                  ("RecomputedSteps", (True, True))]
  np.testing.assert_array_equal(outputs[0], outputs[1])
  np.testing.assert_array_equal(outputs[3], outputs[4])


@pytest.mark.parametrize("attn_type", ["uni", "bi"])
def test_steps_of_many_rows_read_the_feed_forward_kernels_transposed(attn_type, rng, lms,
                                                                      monkeypatch):
  """From TRANSPOSED_KERNEL_ROWS rows a step, XLA's steps read transposed copies of the
  current feed-forward kernels, with the graph executor's tokens (8 and 16 left-padded
  prompts); fewer rows, the graph executor and int8 read the kernels themselves."""
  made, cached_steps = [], generation.CachedSteps

  def recording(*args):
    made.append(cached_steps(*args))
    return made[-1]
  monkeypatch.setattr(generation, "CachedSteps", recording)
  model = lms[attn_type]
  rows = generation.TRANSPOSED_KERNEL_ROWS // (1 if attn_type == "uni" else 2)
  ids = rng.integers(10, N_TOKEN, size=(rows, 9)).astype(np.int32)
  input_ids, input_mask = generation.left_padded([ids[row, row % 5:] for row in range(rows)])
  xla, graph = (generation.generate(model, input_ids, NEW, input_mask=input_mask, **options)
                for options in ({}, {"jit_compile": False}))
  np.testing.assert_array_equal(xla.numpy(), graph.numpy())
  kernels = [dense.kernel.numpy() for block in model.backbone.blocks
             for dense in (block.feed_forward.inner_dense, block.feed_forward.output_dense)]
  copies = made[0].kernel_copies
  assert len(copies) == len(kernels) == 2 * model.backbone.config.n_layer
  for copy, kernel in zip(copies, kernels):
    np.testing.assert_array_equal(copy.numpy(), kernel.T)
  assert made[1].kernel_copies == ()  # the graph executor
  generation.generate(model, input_ids[:rows - 1], NEW, input_mask=input_mask[:rows - 1])
  assert made[2].kernel_copies == ()  # too few rows


@pytest.mark.parametrize("attn_type", ["uni", "bi"])
def test_a_left_padded_row_generates_what_it_generates_alone(attn_type, rng, lms):
  model = lms[attn_type]
  input_ids, input_mask = prompts(rng)
  batch = generation.generate(model, input_ids, NEW, input_mask=input_mask).numpy()
  for row in range(3):
    alone = input_ids[row:row + 1, input_mask[row] == 1]
    np.testing.assert_array_equal(generation.generate(model, alone, NEW).numpy()[0, -NEW:],
                                  batch[row, -NEW:])


def test_sampling_is_reproducible_for_a_seed_and_top_k_1_is_greedy(rng, lms):
  model = lms["bi"]
  input_ids, input_mask = prompts(rng)
  sample = lambda **kw: generation.generate(  # noqa: E731
      model, input_ids, NEW, input_mask=input_mask, temperature=1.0, **kw).numpy()
  first = sample(seed=7)
  np.testing.assert_array_equal(first, sample(seed=7))
  np.testing.assert_array_equal(first, sample(seed=7, use_cache=False))
  assert (first != sample(seed=8)).any()
  greedy = generation.generate(model, input_ids, NEW, input_mask=input_mask).numpy()
  np.testing.assert_array_equal(sample(seed=9, top_k=1), greedy)
  np.testing.assert_array_equal(sample(seed=9, top_p=1e-6), greedy)


def test_stop_ids_end_each_row_and_the_rest_is_padding(rng, lms):
  model = lms["uni"]
  input_ids, input_mask = prompts(rng)
  free = generation.generate(model, input_ids, NEW, input_mask=input_mask).numpy()
  stop = int(free[0, 9 + 2])
  stopped = generation.generate(model, input_ids, NEW, input_mask=input_mask,
                                stop_ids=[stop], pad_id=0).numpy()
  expected = free.copy()
  for row in expected:
    hits = np.flatnonzero(row[9:] == stop)
    if hits.size:
      row[9 + hits[0] + 1:] = 0
  np.testing.assert_array_equal(stopped, expected)
  assert (stopped[0, 9 + 3:] == 0).all()


@pytest.mark.parametrize("attn_type,rows", [("uni", 1), ("bi", 2)])
def test_a_step_runs_one_token_row_over_the_cache(attn_type, rows):
  """The cost claim: the backbone runs once, over the prompt; every compiled step after it runs
  [B, 1] content rows (and, for 'bi', the query row) through the layers."""
  model = tiny_lm(attn_type)
  backbone_shapes, row_shapes = [], []
  original_call = model.backbone.call
  original_rows = type(model.backbone.blocks[0]).rows_at_positions

  def recording_call(inputs, *args, **kwargs):
    backbone_shapes.append(tuple(inputs["input_ids"].shape))
    return original_call(inputs, *args, **kwargs)

  def recording_rows(block, rows, *args, **kwargs):
    row_shapes.append(tuple(rows.shape))
    return original_rows(block, rows, *args, **kwargs)

  model.backbone.call = recording_call
  for block in model.backbone.blocks:
    block.rows_at_positions = recording_rows.__get__(block)
  output = generation.generate(model, np.array([[11, 12, 13]]), 6, jit_compile=False)
  assert output.shape == (1, 9)
  # traced once per shape: the prompt (bucketed to 8, and the 'bi' placeholder), then a step
  assert backbone_shapes == [(1, 8 + rows - 1)]
  d_model = model.backbone.config.d_model
  assert row_shapes == [(1, rows, d_model)] * model.backbone.config.n_layer


@pytest.mark.parametrize("arguments,message", [
    (dict(input_ids=[[1, 2, 3]], max_new_tokens=2, max_length=3), "input_ids"),
    (dict(input_ids=[[1, 2, 3]], max_new_tokens=8, max_length=10), "max_new_tokens"),
    (dict(input_ids=[[1, N_TOKEN]], max_new_tokens=2), r"input_ids\[0, 1\]|input_ids"),
    (dict(input_ids=[[1, -1]], max_new_tokens=2), "input_ids"),
    (dict(input_ids=[[1, 2]], max_new_tokens=2, top_p=0.0), "top_p"),
    (dict(input_ids=[[1, 2]], max_new_tokens=2, top_p=1.5), "top_p"),
    (dict(input_ids=[[1, 2]], max_new_tokens=2, temperature=-1.0), "temperature"),
    (dict(input_ids=[[1, 2]], max_new_tokens=-1), "max_new_tokens"),
    (dict(input_ids=[[1, 2]], max_new_tokens=2, top_k=-3), "top_k"),
    (dict(input_ids=[[1, 2]], max_new_tokens=2, stop_ids=[N_TOKEN + 5]), "stop_ids"),
    (dict(input_ids=[[1, 2], [3, 4]], max_new_tokens=2, input_mask=[[1, 0], [1, 1]]),
     "input_mask"),
    (dict(input_ids=[[1.5, 2.0]], max_new_tokens=2), "input_ids"),
])
def test_bad_input_names_the_argument(arguments, message, lms):
  model = lms["uni"]
  input_ids = arguments.pop("input_ids")
  max_new_tokens = arguments.pop("max_new_tokens")
  with pytest.raises(UserInputError, match=message):
    generation.generate(model, np.array(input_ids), max_new_tokens, **arguments)


def test_shaw_lm_generates_the_same_with_and_without_the_cache(rng):
  """Shaw's learned relative keys (Transformer-XL's ablation) through the cached steps: the
  keys of the distances past clamp_len (3, less than the prompt) are shared, as in one pass."""
  model = tiny_lm("uni", pos_encoding="shaw", clamp_len=3)
  input_ids, input_mask = prompts(rng)
  cached = generation.generate(model, input_ids, NEW, input_mask=input_mask).numpy()
  np.testing.assert_array_equal(cached, generation.generate(
      model, input_ids, NEW, input_mask=input_mask, use_cache=False).numpy())
  assert len(np.unique(cached[:, 9:])) >= 4


def test_models_that_cannot_generate_left_to_right_are_refused():
  with pytest.raises(UserInputError, match="pos_encoding 'absolute_sinusoid'"):
    generation.generate(tiny_lm("uni", pos_encoding="absolute_sinusoid"), np.array([[1, 2]]), 2)
  with pytest.raises(UserInputError, match="XLNetPretrainer"):
    generation.generate(tiny_lm("uni").backbone, np.array([[1, 2]]), 2)
  with pytest.raises(UserInputError, match="bi_data"):
    keras.utils.set_random_seed(0)
    config = XLNetConfig.preset("tiny", n_token=N_TOKEN, bi_data=True)
    generation.generate(XLNetPretrainer(XLNetModel(config)), np.array([[1, 2]] * 2), 2)


def test_cli_continues_prompts_with_a_saved_lm(sp_model, tmp_path):
  keras.utils.set_random_seed(0)
  config = XLNetConfig.preset("tiny", n_token=1000, attn_type="uni", bi_data=False,
                              init_std=0.3)  # wide weights: the context moves the predictions
  model = XLNetPretrainer(XLNetModel(config), objective="clm")
  model({"input_ids": np.ones([1, 4], np.int32)})
  model_dir = str(tmp_path / "lm")
  checkpoints.save_pretrained(model, model_dir)
  result = run_tool("run/generate.py", f"--model_dir={model_dir}", f"--sp_path={sp_model}",
                    "--prompt=The built-in function", "--prompt=A list", "--max_new_tokens=5",
                    "--temperature=0.8", "--seed=1")
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.count("continuation: ") == 2 and "prompt: A list" in result.stdout
  # int8 on one thread: the tokens of the library's int8 generation, not the float model's
  quantized = run_tool("run/generate.py", f"--model_dir={model_dir}", f"--sp_path={sp_model}",
                       "--prompt=A list", f"--max_new_tokens={INT8_NEW}", "--nostop_at_end",
                       "--quantize=int8", "--threads=1")
  assert quantized.returncode == 0, quantized.stderr[-3000:]
  tokenizer = XLNetTokenizer(sp_model)
  prompt = np.array([[tokenizer.special_ids.eod] + tokenizer.encode("A list")], np.int32)
  quantized_model = XLNetPretrainer.from_pretrained(model_dir)
  quantized_model.quantize("int8")
  # recomputed without a trace: the cached steps equal it (test_int8_models_generate_...)
  int8_text = generation.generate(quantized_model, prompt, INT8_NEW, use_cache=False,
                                  jit_compile=False).numpy()
  # The float model, read over the int8 text, would have chosen another token somewhere:
  # its greedy text differs, so the check below tells int8 from float.
  float_choices = reference_next_token_logits(model, int8_text, np.ones(int8_text.shape),
                                              prompt.shape[1]).argmax(-1)
  int8_tokens = int8_text[0, prompt.shape[1]:]
  assert (float_choices[0] != int8_tokens).any()
  assert f"continuation: {tokenizer.decode(int8_tokens.tolist())}\n" in quantized.stdout
  bad = run_tool("run/generate.py", f"--model_dir={model_dir}", f"--sp_path={sp_model}",
                 "--top_p=1.5")
  assert bad.returncode == 1 and "error: generate: top_p must be" in bad.stderr
  assert "Traceback" not in bad.stderr
  missing = run_tool("run/generate.py", f"--model_dir={tmp_path / 'none'}",
                     f"--sp_path={sp_model}")
  assert missing.returncode == 1 and "none" in missing.stderr


GENERATE_FLAG_ERRORS = {
    # case: (flags, the one line on standard error)
    "a negative number of threads": (
        ["--threads=-1"], "error: --threads must be a number of threads >= 0 (0: TensorFlow's "
        "default); got -1"),
    "a quantization mode not supported": (
        ["--quantize=int4"], "FATAL Flags parsing error: flag --quantize=int4: value should "
        "be one of <none|int8>"),
}


@pytest.mark.parametrize("case", sorted(GENERATE_FLAG_ERRORS))
def test_cli_refuses_bad_serving_flags_in_one_line(case, tmp_path):
  flags, expected = GENERATE_FLAG_ERRORS[case]
  result = run_tool("run/generate.py", f"--output_dir={tmp_path / 'none'}", *flags)
  assert result.returncode == 1, result.stderr[-2000:]
  assert result.stderr.strip().splitlines()[0] == expected
  assert "Traceback" not in result.stderr and "continuation:" not in result.stdout
  assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "bfloat16"])
def test_bfloat16_models_generate_the_same_with_and_without_the_cache(policy, rng):
  """Mixed precision (float32 weights cast where a layer is called) and bfloat16 weights
  (what halves the bytes a memory-bound step reads): the cached steps call the layers'
  projections outside `call`, where nothing casts for them."""
  keras.mixed_precision.set_global_policy(policy)
  try:
    model = tiny_lm("bi", seed=3)
    input_ids, input_mask = prompts(rng)
    cached = generation.generate(model, input_ids, NEW, input_mask=input_mask).numpy()
    recomputed = generation.generate(model, input_ids, NEW, input_mask=input_mask,
                                     use_cache=False, jit_compile=False).numpy()
  finally:
    keras.mixed_precision.set_global_policy("float32")
  assert len(np.unique(cached[:, 9:])) >= 3
  np.testing.assert_array_equal(cached, recomputed)


def test_int8_models_generate_from_their_current_weights(rng):
  """A quantized LM decodes with oneDNN's int8 kernel on its weights read as constants of the
  trace (compile_cache.decoding_function): cached steps agree with recomputing, greedy tokens
  mostly with the float model's, and weights loaded after a first call are the ones used."""
  model, other = tiny_lm("bi", seed=3), tiny_lm("bi", seed=4)
  input_ids, input_mask = prompts(rng)
  float_tokens = generation.generate(model, input_ids, NEW, input_mask=input_mask).numpy()
  model.quantize("int8")
  cached = generation.generate(model, input_ids, NEW, input_mask=input_mask).numpy()
  recomputed = generation.generate(model, input_ids, NEW, input_mask=input_mask,
                                   use_cache=False, jit_compile=False).numpy()
  np.testing.assert_array_equal(cached, recomputed)
  assert len(np.unique(cached[:, 9:])) >= 3
  assert np.mean(cached[:, 9] == float_tokens[:, 9]) == 1  # the first token: same inputs
  other.quantize("int8")
  expected = generation.generate(other, input_ids, NEW, input_mask=input_mask).numpy()
  assert not np.array_equal(expected, cached)
  model.set_weights(other.get_weights())
  np.testing.assert_array_equal(
      generation.generate(model, input_ids, NEW, input_mask=input_mask).numpy(), expected)
