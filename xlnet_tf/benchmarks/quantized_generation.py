"""Greedy generation of an LM quantized to int8 against the same LM in float32: how often the
tokens differ (docs/performance.md#accuracy-on-a-task-and-greedy-tokens; the command:
run/quantized_generation.py).

Prompts: the documents run/pretrain.py holds out of its corpus (every 10th of the Python
reference documentation, pydoc_data), windows of prompt_tokens pieces, one starting every
prompt_tokens + new_tokens pieces of each document; the first `rows` of them. Both models
continue every prompt by new_tokens greedy tokens (xlnet_tf.inference.generate).
Reported:
- next-token agreement: on the float model's own continuations, the share of positions whose
  int8 prediction (its argmax over the same context: one forward pass, the left-to-right
  factorization order) is the float model's token;
- continuations: the share of rows generated identically, and the mean number of new tokens
  before a row first differs.
"""

import numpy as np

from xlnet_tf.heads.pretrainer import XLNetPretrainer
from xlnet_tf.inference import generation
from xlnet_tf.pretraining.data import corpus
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.utils.errors import UserInputError


def held_out_prompts(tokenizer, prompt_tokens: int, rows: int, stride: int):
  """int32 [rows, prompt_tokens]: windows of the main job's held-out documents, one starting
  every `stride` pieces of each."""
  _, held_out = corpus.split_held_out(corpus.python_docs_documents())
  prompts = []
  for document in held_out:
    ids = tokenizer.encode(" ".join(document))
    prompts += [ids[start:start + prompt_tokens]
                for start in range(0, len(ids) - prompt_tokens + 1, stride)]
  if len(prompts) < rows:
    raise UserInputError(f"--rows={rows}: the held-out documents hold {len(prompts)} prompts "
                         f"of {prompt_tokens} pieces")
  return np.array(prompts[:rows], np.int32)


def next_token_predictions(model, sequences, first: int):
  """[B, S - first]: the model's argmax for positions first..S-1 of `sequences` [B, S], each
  from the tokens before it (the query stream with the left-to-right factorization order)."""
  batch, length = sequences.shape
  position = np.arange(length)
  perm_mask = (position[None, :] >= position[:, None]).astype(np.float32)  # i sees j < i
  target_mapping = np.eye(length, dtype=np.float32)[first:]
  logits = model({"input_ids": sequences, "input_mask": np.ones([batch, length], np.float32),
                  "perm_mask": np.broadcast_to(perm_mask, [batch, length, length]),
                  "target_mapping": np.broadcast_to(target_mapping,
                                                    [batch, length - first, length])},
                 training=False)["logits"]
  return np.argmax(logits, axis=-1)


def compare(model, prompts, new_tokens: int, batch: int = 8) -> dict:
  """Quantizes `model` (an XLNetPretrainer; changed in place) after generating with it."""
  prompt_length = prompts.shape[1]

  def generate(rows):
    return generation.generate(model, rows, new_tokens).numpy()

  batches = [prompts[start:start + batch] for start in range(0, len(prompts), batch)]
  float_sequences = np.concatenate([generate(rows) for rows in batches])
  float_next = np.concatenate([next_token_predictions(model, rows, prompt_length)
                               for rows in np.split(float_sequences, len(batches))])
  model.quantize("int8")
  int8_sequences = np.concatenate([generate(rows) for rows in batches])
  int8_next = np.concatenate([next_token_predictions(model, rows, prompt_length)
                              for rows in np.split(float_sequences, len(batches))])
  new_float, new_int8 = float_sequences[:, prompt_length:], int8_sequences[:, prompt_length:]
  differs = new_float != new_int8
  first_difference = np.where(differs.any(1), differs.argmax(1), new_tokens)
  return {"rows": len(prompts), "prompt_tokens": prompt_length, "new_tokens": new_tokens,
          "float_next_is_generated": float(np.mean(float_next == new_float)),
          "next_token_agreement": float(np.mean(int8_next == float_next)),
          "identical_rows": float(np.mean(~differs.any(1))),
          "mean_tokens_before_first_difference": float(np.mean(first_difference))}


def load_lm(model_dir, sp_path=None):
  """(the LM in `model_dir`, any layout XLNetPretrainer.from_pretrained reads, set up for
  generation: bi_data, memory and dropout off; its tokenizer: `sp_path`'s, else the
  directory's)."""
  model = XLNetPretrainer.from_pretrained(model_dir, bi_data=False, mem_len=0, reuse_len=0,
                                          dropout=0.0, dropatt=0.0)
  tokenizer = XLNetTokenizer(sp_path) if sp_path else model.tokenizer
  if tokenizer is None:
    raise UserInputError(f"--model_dir={model_dir} holds no spiece.model: give --sp_path")
  return model, tokenizer


def measure(model_dir, sp_path=None, prompt_tokens=64, new_tokens=32, rows=64):
  """compare's result for the LM in `model_dir` (load_lm) on the first `rows` prompts of
  `prompt_tokens` pieces of the held-out documents (held_out_prompts)."""
  model, tokenizer = load_lm(model_dir, sp_path)
  prompts = held_out_prompts(tokenizer, prompt_tokens, rows, stride=prompt_tokens + new_tokens)
  return compare(model, prompts, new_tokens)
