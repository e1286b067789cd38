"""run/pretrain.py end to end: the main job with resume, raw text within a time budget."""

import json
import os
import re

import pytest

from cli_output import run_tool, tensorflow_log_lines
from xlnet_tf.pretraining.data.records import load_record_info


@pytest.mark.slow
def test_cli_main_job_builds_data_trains_evaluates_and_resumes(tmp_path):
  common = [f"--output_dir={tmp_path}",
            "--save_steps=10", "--log_steps=10", "--eval_batches=3", "--warmup_steps=5",
            "--model_size=tiny", "--vocab_size=500", "--seq_len=32", "--reuse_len=16",
            "--num_predict=5", "--bsz_per_host=4"]
  first = run_tool("run/pretrain.py", *common, "--train_steps=20")
  assert first.returncode == 0, first.stderr[-3000:]
  assert "[train] Read 4 files" in first.stdout and "[valid] Read 1 files" in first.stdout
  assert "Held-out permutation-LM loss:" in first.stdout
  # The step lines print as fine-tuning's: whole lines on stdout, without a log prefix.
  assert re.findall(r"^step (\d+)/20: loss \d\.\d{4}  lr ", first.stdout, re.M) == ["10", "20"]
  assert "step 10/20" not in first.stderr
  summary = json.load(open(tmp_path / "model" / "run_summary.json"))
  assert summary["held_out_after"]["loss"] < summary["held_out_before"]["loss"]
  assert os.listdir(tmp_path / "model" / "train"), "TensorBoard events"
  second = run_tool("run/pretrain.py", *common, "--train_steps=30")
  assert second.returncode == 0, second.stderr[-3000:]
  assert "Reusing the data" in second.stdout
  assert f"Resuming from step 20 of 30: {tmp_path}/model/ckpt-20\n" in second.stdout
  assert "Trained to step 30" in second.stdout


def test_cli_pretrains_from_raw_text_within_a_time_budget(tmp_path):
  """--input_glob --objective=mlm --max_minutes: the SentencePiece model, the records and the
  backbone in the main job's layout, the step count fitted to the budget; TensorFlow's logs
  silenced."""
  from xlnet_tf.pretraining.data import corpus
  corpus.write_corpus_files(corpus.python_docs_documents()[:60], str(tmp_path / "text"),
                            num_files=2)
  budget_minutes = 0.35
  result = run_tool(
      "run/pretrain.py", f"--input_glob={tmp_path}/text/*.txt", f"--output_dir={tmp_path}/out",
      "--objective=mlm", f"--max_minutes={budget_minutes}", "--model_size=tiny",
      "--vocab_size=500", "--seq_len=32", "--reuse_len=16", "--num_predict=5",
      "--bsz_per_host=4", "--eval_batches=2", "--log_steps=50", fresh_process=True)
  assert result.returncode == 0, result.stderr[-3000:]
  assert not tensorflow_log_lines(result.stderr)  # only the run's own progress
  out = tmp_path / "out"
  assert (out / "data" / "spiece.model").exists()
  assert load_record_info(str(out / "data" / "train"))["settings"]["objective"] == "mlm"
  assert (out / "model" / "pretrained" / "xlnet_config.json").exists()
  assert "Held-out masked-LM loss:" in result.stdout
  planned = re.search(r"Time budget: .* -> (\d+) steps in all", result.stderr)
  summary = json.load(open(out / "model" / "run_summary.json"))
  assert planned and summary["train_steps"] == int(planned.group(1)) > 20
  assert summary["seconds"] < budget_minutes * 60 + 15
  assert summary["held_out_after"]["loss"] < summary["held_out_before"]["loss"]


