"""Text generation with an XLNetPretrainer: greedy or sampled, with a cache of layer states.

How the next token is predicted:
- 'uni' backbone (attn_type "uni", trained with objective "clm"): the content stream at the
  last token.
- 'bi' backbone (XLNet, objective "perm"): the query stream at a placeholder after the last
  token, in the factorization order that generates left to right: content position i sees the
  positions j <= i (perm_mask), nobody sees the placeholder's content, and its query stream
  (target_mapping one-hot) sees everything before it.
Either way a position's content states depend only on the positions up to it, so what each
layer's attention reads of them, its keys and values, can be cached (`CachedSteps`): one call
runs the prompt and fills the cache, then every step runs two rows per text through the layers
(key_value_cache.py), the newest token's content row, whose keys and values are written
into the cache in place, and, for 'bi', the query row at the placeholder. (Caching the layer
inputs instead, Transformer-XL's `mems`, would re-project the whole context at every step:
measured on the base model, 5x slower at batch 1.)

The cache has C >= T + N slots (rounded up, see CACHE_BUCKET): slot s holds the s-th token of
the left-padded prompt, then of the generated text; slots not yet written and the padding are
masked. Fixed shapes mean one trace for all steps after the prompt; only distances between real
tokens enter XLNet's relative attention, so the padding changes nothing. `use_cache=False`
runs the backbone over the whole window of tokens at every step instead (`RecomputedSteps`):
the reference, with the same greedy tokens.

Settings refused rather than silently changed (load the model with overrides instead, as
run/generate.py does: `XLNetPretrainer.from_pretrained(dir, bi_data=False, same_length=False)`):
bi_data (the second half of a batch would read positions backwards) and, for 'uni', same_length
(its mask depends on how many tokens a call feeds, so cached steps would see a different
context than the reference).

Shapes: B batch, T prompt length, N new tokens, C cache length, L layers, D d_model,
V vocabulary, N heads, H head size.
"""

from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from xlnet_tf import objectives
from xlnet_tf.heads.pretrainer import XLNetPretrainer
from xlnet_tf.inference import key_value_cache
from xlnet_tf.inference.compile_cache import compiled_for, decoding_function
from xlnet_tf.inference.sampling import Sampling, check_sampling, seed_or_fresh, step_seed
from xlnet_tf.modeling.inputs import check_token_id, checked_token_ids
from xlnet_tf.modeling.layers.projections import kernels_read_transposed
from xlnet_tf.text.tokenizer import STANDARD_SPECIAL_IDS
from xlnet_tf.utils import threads
from xlnet_tf.utils.errors import is_int, require

# The default limit on prompt + new tokens: twice the released models' pretraining length
# (512); the cache and every step's attention grow with it.
DEFAULT_MAX_LENGTH = 1024
# Prompts are left-padded to a multiple of PROMPT_BUCKET tokens and the cache to a multiple of
# CACHE_BUCKET slots (masked like padding), so that prompts of nearby lengths share one trace
# and one XLA compilation (about 10 s at base size) instead of compiling for every length.
PROMPT_BUCKET = 8
CACHE_BUCKET = 64
# From this many rows a step (batch x the rows a prompt feeds: 1 for 'uni', 2 for 'bi'), XLA's
# steps read the feed-forward kernels transposed (CachedSteps). Base on a 2-core AVX2 CPU, the
# same steps taking turns in one process (median ms a step): 16 rows 84.5 -> 79.3, 8 rows
# 62.0 -> 55.2, 4 rows 59.0 -> 54.3 (the fastest rounds alike), 2 rows 41.3 -> 42.6.
TRANSPOSED_KERNEL_ROWS = 8


def generate(model, input_ids, max_new_tokens: int, *, use_cache: bool = True,
             temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
             seed: Optional[int] = None, input_mask=None, stop_ids: Sequence[int] = (),
             pad_id: int = STANDARD_SPECIAL_IDS.pad, max_length: int = DEFAULT_MAX_LENGTH,
             jit_compile: Optional[bool] = None):
  """Continues each prompt by `max_new_tokens` tokens, greedy or sampled.

  Fastest on a CPU with oneDNN's int8 kernel: `model.quantize("int8")` first (the steps then
  read int8 weights), and at batch 1 on a machine of few cores with AVX-512 VNNI or AMX one
  TensorFlow thread for the process (`xlnet_tf.utils.threads.set_cpu_threads(1)` before its
  first op). On an AVX2 CPU the kernel runs when TensorFlow loads with oneDNN on, which
  `import xlnet_tf` first sets (its rows then 7-bit: ops.int8_packing.row_top); without it an
  int8 step multiplies float32 and is no faster than the float model's (docs/performance.md).

  Args:
    model: an XLNetPretrainer (the LM head tied to the word embedding); 'uni' or 'bi'
      backbone as the module docstring says.
    input_ids: int [B, T] prompts, left-padded when of different lengths.
    max_new_tokens: N >= 0.
    use_cache: feed one token a step over cached layer states (True) or recompute the whole
      sequence every step (False; the reference, same greedy tokens).
    temperature: 0 = greedy (argmax); > 0 samples from softmax(logits / temperature).
    top_k: sample among the k most likely tokens only (0: no limit).
    top_p: then among the most likely tokens whose probabilities sum to at least top_p, in
      (0, 1] (1: no limit). See `sampling.filter_logits`.
    seed: makes sampling reproducible (None: a fresh seed), with or without the cache.
    input_mask: [B, T], 1 = real token, 0 = left padding; default all real. Every row needs a
      real token.
    stop_ids: token ids that end a row (e.g. </s> and <eod>, tokenizer.special_ids.eos / eod):
      the stop token is kept, the rest of the row is pad_id. Generation ends early once every
      row has stopped; the output keeps its shape.
    pad_id: fills rows after they stop (default: the original vocabulary's <pad>,
      text.tokenizer.STANDARD_SPECIAL_IDS; tokenizer.special_ids.pad for another).
    max_length: the largest T + N accepted (the cache holds that many states per layer).
    jit_compile: compile the prompt call and the steps with XLA (True) or neither (False).
      Default: with the cache, a float32 model's steps and not its prompt (base size, 2-core
      CPU: 0.67x the graph executor's step at batch 1, 0.9x at batch 8, and a first call as
      long: compiling the prompt too is what cost ~5 s; docs/performance.md), not an int8
      model's (its graph steps run oneDNN's int8 product, or without it the integers in
      float32, 4-5x faster than XLA's int8 products on an AVX2 CPU); without the cache, a float32
      model's. Never bfloat16: on a CPU XLA runs bfloat16 matmuls at the float32 rate.
      XLA's steps of TRANSPOSED_KERNEL_ROWS rows or more (batch x 2 for 'bi', batch for
      'uni') read transposed copies of the feed-forward kernels, made at each call from the
      current weights: at base 226 MB more while the call runs.

  Returns:
    An int32 tensor [B, T + N]: each prompt, then its new tokens (pad_id after a stop token).

  Raises:
    UserInputError: (a ValueError) naming the argument, for bad input or an unsupported model
      (not an XLNetPretrainer that predicts the next token, bi_data, an absolute position
      encoding, ...).
  """
  config = _checked_model(model)
  require(isinstance(use_cache, bool), "generate: use_cache", "a bool", use_cache)
  input_ids = checked_token_ids(input_ids, config.n_token, "generate: input_ids")
  batch, length = input_ids.shape
  input_mask = _checked_input_mask(input_mask, input_ids.shape)
  _check_lengths(length, max_new_tokens, max_length)
  check_sampling(temperature, top_k, top_p, seed, "generate")
  stop_ids = tuple(stop_ids)
  for stop_id in stop_ids:
    check_token_id(stop_id, config.n_token, "generate: stop_ids")
  check_token_id(pad_id, config.n_token, "generate: pad_id")
  if max_new_tokens == 0:
    return tf.constant(input_ids)
  seed = seed_or_fresh(seed)
  float32 = model.compute_dtype == "float32"
  if jit_compile is not None:
    compiled = (bool(jit_compile),) * 2  # (the prompt, the steps)
  elif use_cache:
    compiled = (False, float32 and getattr(model, "quantization", None) is None)
  else:
    compiled = (float32, float32)

  padding = -length % PROMPT_BUCKET
  prompt_ids = np.pad(input_ids, [(0, 0), (padding, 0)], constant_values=pad_id)
  prompt_mask = np.pad(input_mask, [(0, 0), (padding, 0)])
  steps = (CachedSteps if use_cache else RecomputedSteps)(
      model, prompt_ids, prompt_mask, max_new_tokens, Sampling(temperature, top_k, top_p),
      *compiled)
  generated = np.full([batch, max_new_tokens], pad_id, np.int32)
  stopped = np.zeros([batch], bool)
  tokens = None
  for index in range(max_new_tokens):
    tokens = np.where(stopped, pad_id, steps(index, tokens, step_seed(seed, index)))
    generated[:, index] = tokens
    stopped |= np.isin(tokens, stop_ids)
    if stopped.all():
      break
  return tf.constant(np.concatenate([input_ids, generated], axis=1))


def left_padded(prompts: Sequence[Sequence[int]], pad_id: int = STANDARD_SPECIAL_IDS.pad):
  """(input_ids int32 [B, T], input_mask float32 [B, T]) of token-id lists of different
  lengths, each padded on the left to the longest (what `generate` takes)."""
  require(len(prompts) > 0 and all(len(ids) > 0 for ids in prompts), "generate: prompts",
          "one or more non-empty token-id lists", [len(ids) for ids in prompts])
  length = max(len(ids) for ids in prompts)
  input_ids = np.full([len(prompts), length], pad_id, np.int32)
  input_mask = np.zeros([len(prompts), length], np.float32)
  for row, ids in enumerate(prompts):
    input_ids[row, length - len(ids):] = ids
    input_mask[row, length - len(ids):] = 1
  return input_ids, input_mask


def _round_up(value: int, multiple: int) -> int:
  return -(-value // multiple) * multiple


# ---- the step --------------------------------------------------------------------------------

def _prediction_inputs(attn_type: str, input_ids, input_mask):
  """Backbone inputs whose output predicts the token after the last of input_ids [B, T].

  'uni': the tokens (the content stream at the last one predicts). 'bi': the tokens and a
  placeholder after them: perm_mask [B, T+1, T+1] lets position i see j <= i and nobody see
  the placeholder; target_mapping [B, 1, T+1] puts the query stream there.
  """
  input_mask = tf.cast(input_mask, tf.float32)
  if attn_type == "uni":
    return {"input_ids": input_ids, "input_mask": input_mask}
  batch, length = tf.shape(input_ids)[0], tf.shape(input_ids)[1]
  ids = tf.concat([input_ids, tf.zeros([batch, 1], input_ids.dtype)], axis=1)  # any id: hidden
  mask = tf.concat([input_mask, tf.ones([batch, 1])], axis=1)
  position = tf.range(length + 1)
  blocked = ((position[None, :] > position[:, None])  # the future
             | tf.equal(position, length)[None, :])  # the placeholder, for itself too
  perm_mask = tf.tile(tf.cast(blocked, tf.float32)[None], [batch, 1, 1])
  target_mapping = tf.one_hot(tf.fill([batch, 1], length), length + 1)
  return {"input_ids": ids, "input_mask": mask, "perm_mask": perm_mask,
          "target_mapping": target_mapping}


def _predicting_states(attn_type: str, outputs):
  """[B, D]: the last layer's state that predicts the next token (see _prediction_inputs)."""
  return outputs["sequence_output"][:, -1] if attn_type == "uni" else outputs["query_output"][:, 0]


def _shift_in(window, new, axis=1):
  """`window` with `new` entering at the end of `axis`, as many of the oldest leaving."""
  oldest_leave = [slice(None)] * axis + [slice(new.shape[axis], None)]
  return tf.concat([window[tuple(oldest_leave)], tf.cast(new, window.dtype)], axis=axis)


class CachedSteps:
  """Steps over the layers' key/value cache (module docstring). Slot s of the cache holds the
  s-th token of the left-padded prompt and then of the generated tokens; step k >= 1 feeds
  token k - 1 at slot S + k - 1 (S the padded prompt length) as a content row and, for 'bi',
  a query row at the next slot."""

  def __init__(self, model, prompt_ids, prompt_mask, max_new_tokens, sampling, jit_prompt,
               jit_steps):
    self.model = model
    self.prompt_length = prompt_ids.shape[1]
    self.prompt = (tf.constant(prompt_ids), tf.constant(prompt_mask, tf.float32))
    capacity = _round_up(self.prompt_length + max_new_tokens, CACHE_BUCKET)
    # 1 = a real token: the prompt's mask, then every generated slot (a step's mask hides the
    # slots after its own; key_value_cache.blocked_after).
    self.real = tf.constant(np.pad(prompt_mask, [(0, 0), (0, capacity - self.prompt_length)],
                                   constant_values=1), tf.float32)
    # The feed-forward kernels transposed for XLA's steps of many rows (kernels_read_transposed):
    # copies of the current weights, made once a call (at base +226 MB while it runs).
    rows = prompt_ids.shape[0] * (1 if model.backbone.config.attn_type == "uni" else 2)
    transposed = (jit_steps and rows >= TRANSPOSED_KERNEL_ROWS
                  and getattr(model, "quantization", None) is None)
    self.kernel_copies = tuple(tf.transpose(kernel) for kernel in _feed_forward_kernels(model)
                               ) if transposed else ()
    # Looked up once: the lookup digests the quantization scales (3 ms at base size, a fifth
    # of an int8 step at batch 1).
    self.compiled = compiled_for(model, _cached_functions, sampling, jit_prompt, jit_steps,
                                 transposed)
    self.cache = self.position_keys = None

  def __call__(self, index, tokens, seed):
    compiled = self.compiled
    if index == 0:
      logits, keys_values = compiled["prompt"](*self.prompt)
      tokens = compiled["choose"](logits, seed)
      capacity = self.real.shape[1]
      self.cache = key_value_cache.KeyValueCache.with_prefix(
          keys_values, capacity, self.model.compute_dtype)
      self.position_keys = compiled["position_keys"](capacity)
      return tokens.numpy()
    slot = self.prompt_length + index - 1
    with threads.ops_in_sequence():  # base, batch 1: 0.78x the step time (int8 0.86x)
      return compiled["step"](self.cache.layers, tf.constant(tokens, tf.int32),
                              tf.constant(slot, tf.int32), self.real, self.position_keys,
                              self.kernel_copies, seed).numpy()


def _feed_forward_kernels(model):
  """The float kernels of every block's feed-forward, in order."""
  return [dense.kernel.value for block in model.backbone.blocks
          for dense in (block.feed_forward.inner_dense, block.feed_forward.output_dense)]


def _cached_functions(model, sampling, jit_prompt, jit_steps, transposed):
  """{"prompt", "position_keys", "step", "choose"} of CachedSteps, the prompt's call and the
  steps' compiled by XLA as asked; "step" returns the chosen tokens. `transposed`: the steps
  read the feed-forward kernels from the transposed copies they are given."""
  attn_type = model.backbone.config.attn_type

  def prompt(ids, mask):
    """The prompt in one call: (the logits of the first token, each layer's keys and values
    [B, N, S, H])."""
    length = tf.shape(ids)[1]
    outputs = key_value_cache.outputs_with_keys_values(
        model.backbone, _prediction_inputs(attn_type, ids, mask))
    logits = model.lm_logits(_predicting_states(attn_type, outputs))
    keys_values = [tuple(tensor[:, :, :length] for tensor in pair)  # not the placeholder's
                   for pair in outputs["keys_values"]]
    return logits, keys_values

  def step_logits(layers, tokens, slot, real, position_keys, kernel_copies):
    copies = ({kernel.ref(): copy for kernel, copy in zip(_feed_forward_kernels(model),
                                                          kernel_copies)}
              if transposed else None)
    with kernels_read_transposed(copies):
      return _step_logits(layers, tokens, slot, real, position_keys)

  def _step_logits(layers, tokens, slot, real, position_keys):
    batch = tf.shape(tokens)[0]
    slots = tf.fill([batch], slot)
    query_slots = None if attn_type == "uni" else slots[:, None] + 1  # the placeholder
    rows = 1 if attn_type == "uni" else 2
    content, query = key_value_cache.run_rows(
        model, key_value_cache.KeyValueCache.of_variables(layers), tokens, slots,
        key_value_cache.blocked_after(real, slots, rows), position_keys,
        query_slots=query_slots)
    states = content[:, 0] if attn_type == "uni" else query[:, 0]
    return model.lm_logits(states)

  def position_keys(capacity: int):
    """Each layer's position keys of the distances C, ..., 0: a step's rows see no later
    slot, so the negative distances of layer_position_keys(C, C) are never read (a trace per
    capacity; in a quantized model's trace, constants folded from the int8 weights)."""
    return model.backbone.layer_position_keys(1, capacity)

  choose = _choose_function(sampling)
  if jit_steps:  # XLA runs the step; the choice runs outside it (_choose_function)
    compiled_logits = decoding_function(model, step_logits, jit_compile=True)

    def step(layers, tokens, slot, real, position_keys, kernel_copies, seed):
      return choose(compiled_logits(layers, tokens, slot, real, position_keys, kernel_copies),
                    seed)
  else:  # one call a step: a separate call of the choice took 0.9 ms of a 15 ms int8 step

    def chosen(layers, tokens, slot, real, position_keys, kernel_copies, seed):
      return sampling.choose(step_logits(layers, tokens, slot, real, position_keys,
                                         kernel_copies), seed)
    step = decoding_function(model, chosen)
  return {"prompt": decoding_function(model, prompt, jit_compile=jit_prompt),
          "position_keys": decoding_function(model, position_keys, jit_compile=jit_prompt),
          "step": step, "choose": choose}


class RecomputedSteps:
  """The reference: every step runs the backbone over the whole window of C tokens (the
  newest on the right, unfilled slots masked like left padding)."""

  def __init__(self, model, prompt_ids, prompt_mask, max_new_tokens, sampling, jit_prompt,
               jit_steps):
    del jit_prompt  # every step runs the whole window, the prompt's first
    self.compiled = compiled_for(model, _recomputed_functions, sampling, jit_steps)
    batch, length = prompt_ids.shape
    capacity = _round_up(length + max_new_tokens - 1, CACHE_BUCKET)
    self.window = (tf.zeros([batch, capacity], tf.int32), tf.zeros([batch, capacity]))
    self.new = (prompt_ids, prompt_mask)  # the first step enters the prompt

  def __call__(self, index, tokens, seed):
    if index > 0:
      self.new = (tokens[:, None], np.ones([len(tokens), 1], np.float32))
    logits, self.window = self.compiled["step"](self.window, self.new[0], self.new[1])
    return self.compiled["choose"](logits, seed).numpy()


def _recomputed_functions(model, sampling, jit_compile):
  """{"step", "choose"} of RecomputedSteps."""

  def step(window, new_ids, new_mask):
    ids = _shift_in(window[0], tf.cast(new_ids, tf.int32))
    mask = _shift_in(window[1], tf.cast(new_mask, tf.float32))
    attn_type = model.backbone.config.attn_type
    outputs = model.backbone(_prediction_inputs(attn_type, ids, mask), training=False)
    logits = model.lm_logits(_predicting_states(attn_type, outputs))
    return logits, (ids, mask)

  return {"step": decoding_function(model, step, jit_compile=jit_compile),
          "choose": _choose_function(sampling)}


def _choose_function(sampling: Sampling):
  """sampling.choose(logits, seed) without XLA for every path: the same draws for a seed, with
  or without the cache and XLA."""
  return tf.function(lambda logits, seed: sampling.choose(logits, seed), autograph=False)


# ---- input checks ----------------------------------------------------------------------------

def _checked_model(model):
  require(isinstance(model, XLNetPretrainer), "generate: model",
          "an XLNetPretrainer (xlnet_tf.heads.XLNetPretrainer, the LM head)",
          type(model).__name__)
  require(model.lm_objective.predicts_next_token, "generate: model",
          "trained to predict the next token (objective " + " or ".join(
              repr(name) for name, objective in objectives.OBJECTIVES.items()
              if objective.predicts_next_token) + ")", f"objective {model.objective!r}")
  config = model.backbone.config
  require(not config.bi_data, "generate: model",
          "built with bi_data=False (bi_data reads half of a batch backwards; load it with "
          "bi_data=False)", "config.bi_data=True")
  require(not (config.same_length and config.attn_type == "uni"), "generate: model",
          "built with same_length=False (its mask depends on how many tokens a step feeds; "
          "load it with same_length=False)", "config.same_length=True")
  require(not config.pos_encoding.startswith("absolute"), "generate: model",
          "one with relative positions (relative or shaw): an absolute encoding counts "
          "positions within the segment a call feeds, which a cached step of one token "
          "cannot", f"pos_encoding {config.pos_encoding!r}")
  return config


def _checked_input_mask(input_mask, shape):
  if input_mask is None:
    return np.ones(shape, np.float32)
  mask = np.asarray(input_mask.numpy() if isinstance(input_mask, tf.Tensor) else input_mask)
  require(mask.shape == shape, "generate: input_mask", f"of shape [B, T] = {list(shape)}",
          f"shape {list(mask.shape)}")
  require(np.isin(mask, (0, 1)).all(), "generate: input_mask",
          "0 (padding) or 1 (real token)", f"values {np.unique(mask)[:5]}")
  real = mask.astype(bool)
  require(real[:, -1].all(), "generate: input_mask",
          "left padding with a real token in every row (each row 0 ... 0 1 ... 1)",
          f"rows {np.flatnonzero(~real[:, -1]).tolist()} ending in padding")
  require((real[:, 1:] >= real[:, :-1]).all(), "generate: input_mask",
          "left padding (each row 0 ... 0 1 ... 1)",
          f"rows {np.flatnonzero((real[:, 1:] < real[:, :-1]).any(1)).tolist()} with a gap")
  return mask.astype(np.float32)


def _check_lengths(length, max_new_tokens, max_length):
  require(is_int(max_length) and max_length > 0, "generate: max_length", "a positive integer",
          max_length)
  require(is_int(max_new_tokens) and max_new_tokens >= 0, "generate: max_new_tokens",
          "an integer >= 0", max_new_tokens)
  require(length < max_length, "generate: input_ids",
          f"prompts shorter than max_length={max_length} tokens (raise max_length to cache "
          "longer contexts)", f"length T = {length}")
  require(length + max_new_tokens <= max_length, "generate: max_new_tokens",
          f"at most max_length - T = {max_length} - {length} = {max_length - length} "
          "(raise max_length for longer sequences)", max_new_tokens)
