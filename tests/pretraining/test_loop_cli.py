"""run/pretrain.py end to end: the main job with resume, raw text within a time budget, a
text of one document with the batch and sequence flags alone."""

import json
import os
import re

import pytest

from cli_output import run_tool, tensorflow_log_lines
from forked_tools import run_forked
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




# A pretrained directory as README's "Loading and saving" opens it: a head that reads strings.
CLASSIFY_RAW_STRINGS = """
import sys
from xlnet_tf import XLNetClassifier
classifier = XLNetClassifier.from_pretrained(sys.argv[1], num_classes=2)
print("logits", tuple(classifier(["A fine film.", "Dull and long."]).shape))
"""


def test_cli_pretrains_one_document_with_its_batch_and_sequence_flags(tmp_path):
  """A text without blank lines (one document) has its end held out; --train_batch_size and
  --seq_len alone make the data the run trains on (reuse_len and num_predict follow seq_len);
  the backbone opens with its tokenizer and classifies raw strings; another batch size over
  the trained data is refused by its flag."""
  from xlnet_tf.pretraining.data import corpus
  lines = [line for document in corpus.python_docs_documents() for line in document][:400]
  text = tmp_path / "one_document.txt"
  text.write_text("\n".join(lines) + "\n")
  flags = [f"--input_glob={text}", f"--output_dir={tmp_path}/out", "--model_size=tiny",
           "--vocab_size=300", "--seq_len=64", "--train_steps=2", "--eval_batches=1",
           "--log_steps=1", "--nojit_compile"]
  result = run_tool("run/pretrain.py", *flags, "--train_batch_size=8")
  assert result.returncode == 0, result.stderr[-3000:]
  assert re.search(r"^Held out for evaluation: the last \d+ of 400 lines \(5% of the text\), "
                   r"as the text has 1 document, fewer than the 20 that holding out 1 of every "
                   r"20 needs\.$", result.stdout, re.M), result.stdout
  out = tmp_path / "out"
  settings = load_record_info(str(out / "data" / "train"))["settings"]
  assert (settings["bsz_per_host"], settings["seq_len"], settings["reuse_len"],
          settings["num_predict"]) == (8, 64, 32, 10)
  assert "Held-out permutation-LM loss:" in result.stdout
  for directory in ("pretrained", "lm"):
    assert (out / "model" / directory / "spiece.model").read_bytes() == (
        out / "data" / "spiece.model").read_bytes()
  # In a child process: TensorFlow's thread pools are not to be started in the test's own,
  # which later tests fork.
  classify = tmp_path / "classify.py"
  classify.write_text(CLASSIFY_RAW_STRINGS)
  classified = run_forked([str(classify), str(out / "model" / "pretrained")])
  assert classified.returncode == 0, classified.stderr[-3000:]
  assert classified.stdout.splitlines()[-1] == "logits (2, 2)"
  refused = run_tool("run/pretrain.py", *flags, "--train_batch_size=4")
  assert refused.returncode == 1
  recorded = f"{out}/model/run_config.json"
  assert refused.stderr.strip().splitlines() == [
      f"error: {out}/model was trained with other settings: --bsz_per_host (data.bsz_per_host), "
      "--train_batch_size (training.global_batch_size) differ from "
      f"{recorded}; resume with them (--config_file={recorded}), or give another --model_dir"]
