"""Continues prompts with a language model: one trained by run/pretrain.py (the LM head it saves
under model/lm), or --model_dir=DIR_OR_HUB_ID in any layout (transformers' XLNetLMHeadModel,
the original pretraining's checkpoint; its tokenizer comes with it): greedy by default, or
sampled with --temperature, --top_k, --top_p.

  python run/pretrain.py --objective=clm      # -> pretrain_output_clm/
  python run/generate.py --prompt="The built-in function" --max_new_tokens=40
  python run/generate.py --model_dir=xlnet/xlnet-base-cased --prompt="The built-in function"

Prompts of different lengths run as one left-padded batch; a key/value cache makes each new
token one step over the context (--nouse_cache recomputes everything, the reference).
--quantize=int8 decodes with int8 weights (Keras' quantize("int8"): about half the float
model's step time at batch 1); --threads=1 runs TensorFlow on one thread, the fastest setting
for batch-1 int8 decoding on a machine of few cores (docs/performance.md):

  python run/generate.py --quantize=int8 --threads=1 --prompt="The built-in function"
"""

import time

from absl import app
from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.inference import generation
from xlnet_tf.serving.saved_model import QUANTIZE_MODES
from xlnet_tf.utils import threads

from xlnet_tf.cli import lm_flags

lm_flags.define_lm_flags()
flags.DEFINE_multi_string("prompt", ["The built-in function"], "A prompt (repeat the flag "
                          "for a batch).")
flags.DEFINE_integer("max_new_tokens", 40, "Tokens generated after each prompt.")
lm_flags.define_sampling_flags()
flags.DEFINE_bool("use_cache", True, "Cache the context's keys and values (else recompute).")
flags.DEFINE_bool("stop_at_end", True, "End a continuation at </s> or <eod>.")
flags.DEFINE_bool("new_document", True, "Start each prompt with <eod>, as documents start in "
                  "the training stream.")
flags.DEFINE_integer("max_length", generation.DEFAULT_MAX_LENGTH, "Longest prompt + "
                     "continuation, in tokens.")
flags.DEFINE_enum("quantize", "none", QUANTIZE_MODES, "int8: the LM's projections in int8 "
                  "(model.quantize('int8')), activations quantized per token.")
flags.DEFINE_integer("threads", threads.DEFAULT, "TensorFlow's intra- and inter-op threads "
                     f"({threads.DEFAULT}: its default, every CPU).")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  threads.set_cpu_threads(FLAGS.threads, "--threads")
  place = lm_flags.lm_place()
  tokenizer = lm_flags.lm_tokenizer(place)
  special = tokenizer.special_ids
  prompts = []
  for index, text in enumerate(FLAGS.prompt):
    ids = ([special.eod] if FLAGS.new_document else []) + tokenizer.encode(text)
    if not ids:
      raise app.UsageError(f"--prompt number {index + 1} ({text!r}) has no tokens")
    prompts.append(ids)
  # Generation reads left to right only: bi_data and same_length are training settings.
  model = lm_flags.language_model(place, tokenizer, bi_data=False, same_length=False)
  if FLAGS.quantize == "int8":
    model.quantize("int8")
  input_ids, input_mask = generation.left_padded(prompts, special.pad)
  stop_ids = (special.eos, special.eod) if FLAGS.stop_at_end else ()
  start = time.perf_counter()
  output = generation.generate(
      model, input_ids, FLAGS.max_new_tokens, use_cache=FLAGS.use_cache,
      temperature=FLAGS.temperature, top_k=FLAGS.top_k, top_p=FLAGS.top_p, seed=FLAGS.seed,
      input_mask=input_mask, stop_ids=stop_ids, pad_id=special.pad,
      max_length=FLAGS.max_length).numpy()
  seconds = time.perf_counter() - start
  generated = 0
  for text, row in zip(FLAGS.prompt, output[:, input_ids.shape[1]:]):
    continuation = []
    for token in row.tolist():
      if token in stop_ids:
        break
      continuation.append(token)
    generated += len(continuation)
    print(f"prompt: {text}\ncontinuation: {tokenizer.decode(continuation)}\n")
  print(f"{generated} tokens for {len(prompts)} prompt(s) in {seconds:.1f} s "
        f"(first call: includes compiling the step).")


def entry():
  """The console script (setup.cfg) and run/generate.py."""
  cli.run(main, usage=__doc__)
