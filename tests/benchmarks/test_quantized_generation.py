"""xlnet_tf.benchmarks.quantized_generation (run/quantized_generation.py): an int8 LM's greedy
tokens against its float model's, on prompts from the main job's held-out documents."""

import json

import keras
import numpy as np
import pytest

from xlnet_tf import XLNetConfig, XLNetModel, XLNetPretrainer, checkpoints
from xlnet_tf.benchmarks import quantized_generation
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.utils.errors import UserInputError

from cli_output import run_tool


def test_compare_counts_agreement_on_held_out_prompts(sp_model, tmp_path):
  keras.utils.set_random_seed(0)
  tokenizer = XLNetTokenizer(sp_model)
  config = XLNetConfig.preset("tiny", n_token=tokenizer.vocab_size, bi_data=False,
                              init_std=0.3)
  checkpoints.save_pretrained(XLNetPretrainer(XLNetModel(config)), str(tmp_path / "lm"))
  output = tmp_path / "result.json"
  measured = run_tool("run/quantized_generation.py", f"--model_dir={tmp_path / 'lm'}",
                      f"--sp_path={sp_model}", "--prompt_tokens=12", "--new_tokens=6",
                      "--rows=5", f"--output={output}")
  assert measured.returncode == 0, measured.stderr[-3000:]
  result = json.loads(output.read_text())
  assert json.loads(measured.stdout) == result
  assert (result["rows"], result["prompt_tokens"], result["new_tokens"]) == (5, 12, 6)
  # The one-pass reference predicts what generation generated: the measure is of the models.
  assert result["float_next_is_generated"] == 1.0
  assert 0.5 <= result["next_token_agreement"] <= 1.0
  assert 0.0 <= result["identical_rows"] <= 1.0
  assert 0.0 <= result["mean_tokens_before_first_difference"] <= 6.0


def test_prompts_are_windows_of_held_out_documents(sp_model):
  tokenizer = XLNetTokenizer(sp_model)
  prompts = quantized_generation.held_out_prompts(tokenizer, 10, 4, stride=15)
  assert prompts.shape == (4, 10) and prompts.dtype == np.int32
  assert len({tuple(row) for row in prompts}) == 4


def test_more_prompts_than_the_held_out_documents_hold_is_one_line(sp_model):
  tokenizer = XLNetTokenizer(sp_model)
  with pytest.raises(UserInputError, match=r"--rows=100000: the held-out documents hold \d+ "
                     r"prompts of 10 pieces"):
    quantized_generation.held_out_prompts(tokenizer, 10, 100000, stride=15)
