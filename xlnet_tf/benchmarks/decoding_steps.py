"""The decoding rows of xlnet_tf in run/benchmark.py: greedy generation (--modes=generate),
infilling with and without the context's cache (infill, infill_recompute), and
Transformer-XL's Table 7, evaluation with memory against a vanilla re-run window (lm_eval,
lm_eval_vanilla); and the int8 LM's generation, which int8_steps times.
"""

import functools
from typing import Any, Callable, NamedTuple

import keras
import numpy as np

from xlnet_tf import XLNetConfig, XLNetModel, XLNetPretrainer
from xlnet_tf.inference import generation, infilling
from xlnet_tf.modeling.ops.int8_packing import onednn_available
from xlnet_tf.studies.evaluation_speed import memory_evaluation, vanilla_evaluation
from xlnet_tf.benchmarks import rows, steps


def measure_decoding(spec):
  """A generate, infill or lm_eval row of xlnet_tf (rows.timed; generate with the step time,
  rows.with_step_time)."""
  if spec["mode"] == "generate":
    return timed_generation(generation_step(spec), spec)
  return rows.timed(build_decoding_step(spec), spec)


def build_decoding_step(spec):
  """A callable running one call of spec["mode"]'s decoding (rows.DECODING_MODES but
  generate: generation_step)."""
  if spec["dtype"] == "bfloat16":
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
  if spec["mode"] in rows.INFILL_MODES:
    return _infill_step(spec)
  return _lm_evaluation_step(spec, steps.jit_of(spec))


class Generation(NamedTuple):
  """A generate row's calls: run (spec["new_tokens"] greedy tokens), prompt_run (one token
  after the same prompt), the LM, and with int8 the float LM's generated ids."""
  run: Callable
  prompt_run: Callable
  model: Any
  reference: Any = None


def generation_step(spec, int8=False):
  """Greedy generation of spec["new_tokens"] tokens after random prompts [batch, seq_len] with
  the XLNet LM (XLNetPretrainer, objective perm; bi_data off, as generation needs), as a
  Generation. bfloat16: the weights themselves in bfloat16 (memory-bound steps read half the
  bytes). int8: the LM quantized after generating the reference ids."""
  if spec["dtype"] == "bfloat16":  # bfloat16 weights: half the bytes a step reads
    keras.mixed_precision.set_global_policy("bfloat16")
  config = XLNetConfig.preset(spec["size"], n_token=rows.VOCAB, bi_data=False)
  keras.utils.set_random_seed(0)  # the same LM in every row and run (same_tokens compares)
  model = XLNetPretrainer(XLNetModel(config))
  ids, _, _ = rows.random_inputs(spec["batch"], spec["seq_len"])

  def generate(new_tokens):
    return generation.generate(model, ids, new_tokens).numpy()
  reference = None
  if int8:
    reference = generate(spec["new_tokens"])
    model.quantize("int8")
  return Generation(functools.partial(generate, spec["new_tokens"]),
                    functools.partial(generate, 1), model, reference)


def step_weight_bytes(model) -> int:
  """The bytes of weights a decoding step of the LM reads: every weight (the tied embedding
  once, read by the output projection), or with the int8 output projection its int8 copy and
  scales instead of the embedding (then only looked up); int8 kernels at 4 bytes where they
  are multiplied as float32."""
  # Without oneDNN's int8 kernel the steps multiply the int8 kernels as float32 constants
  # (ops.int8_products._float_product): 4 bytes a weight read.
  int8_bytes = 1 if onednn_available() else 4
  total = sum(int(np.prod(variable.shape))
              * (int8_bytes if variable.dtype == "int8" else np.dtype(variable.dtype).itemsize)
              for variable in model.weights)
  if getattr(model, "lm_output_int8", None) is not None:
    embedding = model.backbone.word_embedding
    total -= int(np.prod(embedding.shape)) * np.dtype(embedding.dtype).itemsize
  return total


def timed_generation(generation: Generation, spec):
  """rows.timed of a Generation, with its step time and weight bytes (rows.with_step_time)."""
  return rows.with_step_time(rows.timed(generation.run, spec), generation.prompt_run,
                             step_weight_bytes(generation.model))


def infill_inputs(batch, seq_len, seed=0, vocab=rows.VOCAB):
  """Random texts [batch, seq_len] ending in <sep> <cls>, each with rows.INFILL_SPANS blank
  spans of rows.INFILL_SPAN pieces at random, non-overlapping places: (input_ids, segment_ids,
  fill_mask)."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(10, vocab, size=[batch, seq_len]).astype(np.int32)
  ids[:, -2:] = [infilling.DEFAULT_SEP_ID, infilling.DEFAULT_CLS_ID]
  segments = np.zeros_like(ids)
  segments[:, -1] = 2
  fill_mask = np.zeros([batch, seq_len], np.float32)
  slots = (seq_len - 2) // rows.INFILL_SPAN  # span-aligned places before <sep>
  for row in range(batch):
    for slot in rng.choice(slots, rows.INFILL_SPANS, replace=False):
      fill_mask[row, slot * rows.INFILL_SPAN:(slot + 1) * rows.INFILL_SPAN] = 1
  return ids, segments, fill_mask


def _infill_step(spec):
  """Greedy left-to-right filling of the blanks of infill_inputs with the XLNet LM (objective
  perm, bi_data off), reusing the context's states or recomputing them (rows.INFILL_MODES)."""
  config = XLNetConfig.preset(spec["size"], n_token=rows.VOCAB, bi_data=False)
  model = XLNetPretrainer(XLNetModel(config))
  ids, segments, fill_mask = infill_inputs(spec["batch"], spec["seq_len"])
  use_cache = rows.INFILL_MODES[spec["mode"]]
  return lambda: infilling.fill(model, ids, fill_mask, segment_ids=segments,
                                use_cache=use_cache).numpy()


def _lm_evaluation_step(spec, jit):
  """One call of xlnet_tf.studies.evaluation_speed's memory or vanilla evaluation with a
  left-to-right LM (attn_type uni, objective clm) of spec["size"]."""
  if spec["batch"] != 1:
    raise ValueError(f"--modes={spec['mode']} times batch 1 (Table 7); got --shapes "
                     f"{spec['batch']}x{spec['seq_len']}")
  length = spec["seq_len"]
  config = XLNetConfig.preset(spec["size"], n_token=rows.VOCAB, attn_type="uni", bi_data=False)
  model = XLNetPretrainer(XLNetModel(config), objective="clm")
  calls = spec["repeats"] + 1
  segments, segment = rows.LM_EVAL_SEGMENTS, rows.LM_EVAL_SEGMENT
  ids = np.random.default_rng(0).integers(
      0, rows.VOCAB, size=[1, length + (2 + calls * segments) * segment + 1])
  ids = ids.astype(np.int32)
  if spec["mode"] == "lm_eval":
    return memory_evaluation(model, ids, length, segment, segments, jit)
  return vanilla_evaluation(model, ids, length, rows.LM_EVAL_WINDOWS, jit)
