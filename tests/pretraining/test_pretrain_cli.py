"""run/pretrain.py on bad flags and a model directory in use: one line, exit 1, nothing made."""

import os
import socket

import pytest

from cli_output import run_tool
from xlnet_tf.training import run_lock


def _in_use(model_dir):
  return (f"{model_dir}: another run (pid {os.getpid()} on {socket.gethostname()}) is using "
          f"this directory (lock {model_dir}/{run_lock.LOCK_FILE}); wait for it to end or use "
          "another directory")


# (flags, the error line given the model directory); every case fails before training.
CASES = {
    "no steps": (["--train_steps=0"], lambda _: "--train_steps=0: must be positive"),
    "negative learning rate": (["--learning_rate=-0.001"],
                               lambda _: "--learning_rate=-0.001: must be positive"),
    "checkpoint every 0 steps": (["--save_steps=0"], lambda _: "--save_steps=0: must be positive"),
    "a loss scale of words": (["--dtype=float16", "--loss_scale=high"],
                              lambda _: "--loss_scale='high': 'dynamic' or a number"),
    "model directory in use": (["--locked"], _in_use),
    "no micro-batches": (["--gradient_accumulation_steps=0"],
                         lambda _: "--gradient_accumulation_steps=0: must be positive"),
    # small_data["bi"]: 4 rows a batch, forward and backward halves of 2
    "micro-batches not dividing the batch": (
        ["--gradient_accumulation_steps=4"],
        lambda _: "--gradient_accumulation_steps=4 must divide the 2 rows of "
                  "--train_batch_size=4 for each of the forward and backward halves (bi_data): "
                  "each step's batch is split into that many equal micro-batches"),
    # Transformer-XL's ablations: for a left-to-right LM only.
    "an ablation encoding for XLNet": (
        ["--pos_encoding=shaw", "--clamp_len=8"],
        lambda _: "--pos_encoding=shaw: for --objective=clm only (Transformer-XL's ablations "
                  "of a left-to-right LM)"),
    "half loss for XLNet": (
        ["--loss_positions=half"],
        lambda _: "--loss_positions=half: for --objective=clm only (Transformer-XL's ablations "
                  "of a left-to-right LM)"),
    # A --model_config of values no model can have: refused before any data are read or made.
    "a config of NaN": (["--model_config={config}"],
                        lambda _: "{config}: XLNetConfig.d_model must be a positive integer up to "
                                  "2^31 - 1; got nan"),
    "a learned table without a size": (
        ["--objective=clm", "--pos_encoding=absolute_learned"],
        lambda _: "--pos_encoding=absolute_learned needs --clamp_len > 0 (the largest distance "
                  "or position its learned table holds)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_and_leaves_nothing(small_data, tmp_path, case):
  flags, expected = CASES[case]
  config = tmp_path.parent / f"{tmp_path.name}-nan.json"  # outside tmp_path, which stays empty
  config.write_text('{"n_token": 500, "n_layer": 2, "d_model": NaN, "n_head": 4, "d_head": 8, '
                    '"d_inner": 64, "ff_activation": "gelu", "untie_r": true}')
  flags = [flag.format(config=config) for flag in flags]
  model_dir = str(tmp_path / "model")
  locked = "--locked" in flags
  arguments = [f"--train_data={small_data['bi']}", f"--model_dir={model_dir}",
               "--model_size=tiny", *[flag for flag in flags if flag != "--locked"]]
  if locked:
    with run_lock.hold(model_dir):  # this test's process is the other run
      result = run_tool("run/pretrain.py", *arguments)
  else:
    result = run_tool("run/pretrain.py", *arguments)
  assert result.returncode == 1, result.stderr[-3000:]
  assert result.stderr.strip().splitlines() == [
      f"error: {expected(model_dir).format(config=config)}"]
  assert os.listdir(tmp_path) == []  # no model directory (the test's lock was removed too)


# Raw text refused before any data are made: (flags, the error line given the text file).
TEXT_CASES = {
    "a text too small for one batch": (
        [], lambda text: f"--input_glob={text}: 25 characters is too little text for one batch "
                         "of 16 rows x 128 tokens (about 1,536 tokens, each a SentencePiece piece "
                         "of a few characters); give more text, or a smaller --train_batch_size "
                         "or --seq_len"),
    "an odd sequence without a memory length": (
        ["--seq_len=63"], lambda _: "--seq_len=63: without --reuse_len, half of it is reused as "
                                    "memory, so it must be even (or give --reuse_len)"),
    "a batch and rows per host that disagree": (
        ["--train_batch_size=8", "--bsz_per_host=16"],
        lambda _: "--train_batch_size=8 and --bsz_per_host=16 disagree: the global batch is "
                  "bsz_per_host x the 1 worker(s); give one of them"),
    "a batch without forward and backward halves": (
        ["--train_batch_size=5"],
        lambda _: "--train_batch_size=5: must be a multiple of 2, the rows of a step shared "
                  "equally by the 1 replica(s) in forward and backward halves (bi_data)"),
}


@pytest.mark.parametrize("case", sorted(TEXT_CASES))
def test_raw_text_refused_in_one_line_naming_it(tmp_path, case):
  flags, expected = TEXT_CASES[case]
  text = tmp_path.parent / f"{tmp_path.name}-tiny.txt"  # outside tmp_path, which stays empty
  text.write_text("Hello world.\nThis is tiny.\n")
  result = run_tool("run/pretrain.py", f"--input_glob={text}", f"--output_dir={tmp_path}/out",
                    "--model_size=tiny", *flags)
  assert result.returncode == 1, result.stderr[-3000:]
  assert result.stderr.strip().splitlines() == [f"error: {expected(text)}"]
  assert os.listdir(tmp_path) == []


# A faulty --config_file: (its text, the error line after "PATH: ").
CONFIG_FILE_CASES = {
    "an unknown key": ('{"training": {"optimizer": {"learning_rat": 0.1}}}',
                       "training.optimizer.learning_rat: unknown key (did you mean "
                       "training.optimizer.learning_rate?)"),
    "a wrong type": ('{"mem_len": "8"}', "mem_len: expected an integer or null, got '8'"),
    "broken JSON": ('{"mem_len": 8', "not valid JSON (Expecting ',' delimiter: line 1 column 14 "
                                     "(char 13))"),
    "bad data settings": ('{"data": {"seq_len": 32, "reuse_len": 40}}',
                          "data: PretrainingDataConfig.reuse_len must be in [0, seq_len - 3) so "
                          "A and B get a token each (seq_len=32); got 40"),
}


@pytest.mark.parametrize("case", sorted(CONFIG_FILE_CASES))
def test_a_faulty_config_file_is_one_line_and_leaves_nothing(tmp_path, case):
  text, message = CONFIG_FILE_CASES[case]
  config_file = tmp_path.parent / f"{tmp_path.name}-run_config.json"
  config_file.write_text(text)
  result = run_tool("run/pretrain.py", f"--config_file={config_file}",
                    f"--output_dir={tmp_path}/out")
  assert result.returncode == 1, result.stderr[-3000:]
  assert result.stderr.strip().splitlines() == [f"error: {config_file}: {message}"]
  assert os.listdir(tmp_path) == []
