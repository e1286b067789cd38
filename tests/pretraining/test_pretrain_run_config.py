"""run/pretrain.py's record of its settings, MODEL_DIR/run_config.json: the run repeated from
it alone (and its paths) ends with the same weights; a resume that changes what it trains is
refused in one line naming the settings, nothing written; flags given beside the file change
what they set."""

import json

import numpy as np
import pytest

from cli_output import run_tool
from xlnet_tf import XLNetModel
from xlnet_tf.pretraining.data import corpus

# The smallest run that makes its data (SentencePiece, records) and trains: 3 steps of the
# tiny backbone with a memory of its own length (not the data's reuse_len: it comes from the
# file), dropout on (its masks follow the seed).
SETTINGS = ["--model_size=tiny", "--vocab_size=300", "--seq_len=32", "--bsz_per_host=4",
            "--train_steps=3", "--learning_rate=0.01", "--warmup_steps=1", "--mem_len=8",
            "--seed=3", "--eval_batches=1", "--log_steps=1", "--save_steps=3"]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
  """A run from raw text into out/: its text, its output directory."""
  root = tmp_path_factory.mktemp("recorded_run")
  corpus.write_corpus_files(corpus.python_docs_documents()[:10], str(root / "text"),
                            num_files=1)
  text = str(root / "text" / "*.txt")
  result = run_tool("run/pretrain.py", f"--input_glob={text}", f"--output_dir={root / 'out'}",
                    *SETTINGS)
  assert result.returncode == 0, result.stderr[-3000:]
  return {"text": text, "out": root / "out"}


def _weights(output_dir):
  return XLNetModel.from_pretrained(str(output_dir / "model" / "pretrained")).get_weights()


def _recorded(output_dir):
  return json.loads((output_dir / "model" / "run_config.json").read_text())


@pytest.mark.slow
def test_a_run_repeated_from_its_run_config_has_the_same_weights(first_run, tmp_path):
  recorded = _recorded(first_run["out"])
  assert (recorded["mem_len"], recorded["data"]["seq_len"], recorded["data"]["reuse_len"],
          recorded["training"]["optimizer"]["learning_rate"],
          recorded["training"]["runtime"]["seed"]) == (8, 32, 16, 0.01, 3)
  assert (recorded["input_glob"], recorded["output_dir"]) == (first_run["text"],
                                                              str(first_run["out"]))
  config_file = f"--config_file={first_run['out']}/model/run_config.json"
  # Its paths are recorded, not followed: they are given again.
  refused = run_tool("run/pretrain.py", config_file, f"--output_dir={tmp_path / 'none'}")
  assert refused.returncode == 1
  assert refused.stderr.strip().splitlines() == [
      f"error: {config_file}: input_glob is {first_run['text']!r}; a config file's paths are "
      "not followed: give --input_glob"]
  again = run_tool("run/pretrain.py", config_file, f"--input_glob={first_run['text']}",
                   f"--output_dir={tmp_path / 'again'}")
  assert again.returncode == 0, again.stderr[-3000:]
  assert "Model: 2 layers, d_model 32, " in again.stdout and "mem_len 8;" in again.stdout
  assert _recorded(tmp_path / "again") == dict(recorded, output_dir=str(tmp_path / "again"))
  first, repeated = _weights(first_run["out"]), _weights(tmp_path / "again")
  assert len(first) == len(repeated) > 10
  for trained, retrained in zip(first, repeated):
    np.testing.assert_allclose(retrained, trained, rtol=1e-6, atol=1e-7)


def test_a_resume_that_changes_a_setting_is_refused(first_run):
  """(A resume that runs longer: tests/pretraining/test_loop_cli.py.)"""
  out, text = first_run["out"], first_run["text"]
  config_file = f"--config_file={out}/model/run_config.json"
  before = (out / "model" / "run_config.json").read_text()
  listed = sorted(path.name for path in out.rglob("*"))
  # The file's mem_len 8 replaced by the flag: another model, refused in one line.
  changed = run_tool("run/pretrain.py", config_file, f"--input_glob={text}",
                     f"--output_dir={out}", "--mem_len=4", "--learning_rate=0.02")
  assert changed.returncode == 1
  recorded = f"{out}/model/run_config.json"
  assert changed.stderr.strip().splitlines() == [
      f"error: {out}/model was trained with other settings: --mem_len (mem_len), "
      "--learning_rate (training.optimizer.learning_rate) differ from "
      f"{recorded}; resume with them (--config_file={recorded}), or give another --model_dir"]
  assert (out / "model" / "run_config.json").read_text() == before
  assert sorted(path.name for path in out.rglob("*")) == listed  # nothing made or removed
  # Its paths may change, not the text its data were made from (compared by the files' sizes).
  other = out.parent / "other_text.txt"
  other.write_text("".join(open(path).read() for path in sorted(out.parent.glob(
      "text/*.txt"))) + "One more line.\n")
  other_text = run_tool("run/pretrain.py", config_file, f"--input_glob={other}",
                        f"--output_dir={out}")
  assert other_text.returncode == 1
  assert other_text.stderr.strip().splitlines() == [
      f"error: {out}/data holds the data {out}/model was trained on, made for other text "
      "(--input_glob: the files or their sizes differ): resume with what made them, or give "
      "another --output_dir"]
  assert sorted(path.name for path in out.rglob("*")) == listed
