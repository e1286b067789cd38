import json
import os
import re

import numpy as np

from cli_output import run_tool
from model_inputs import padded_pair_batch, tiny_config
from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf.text.read_report import ReadReport
from xlnet_tf.tasks.race import encode_race, option_text, read_race
from xlnet_tf.text.tokenizer import XLNetTokenizer
from xlnet_tf.heads.multiple_choice import XLNetMultipleChoice


def test_each_option_is_scored_as_its_own_sequence(rng):
  model = XLNetMultipleChoice(XLNetModel(tiny_config()))
  per_option = [padded_pair_batch(rng, 2, 8, 50, pad_lengths=[0, 1]) for _ in range(4)]
  stacked = {k: np.stack([o[k] for o in per_option], axis=1) for k in per_option[0]}
  logits = model(stacked).numpy()
  assert logits.shape == (2, 4)
  for choice, option in enumerate(per_option):
    sequence = model.backbone(option)["sequence_output"]
    single = model.logit(model.sequence_summary(sequence, option["input_mask"])).numpy()[:, 0]
    np.testing.assert_allclose(logits[:, choice], single, atol=1e-5)


def write_race(root, split, level, records):
  folder = root / split / level
  folder.mkdir(parents=True, exist_ok=True)
  for index, record in enumerate(records):
    (folder / f"{index}.txt").write_text(json.dumps(record))


def test_race_reader_and_layout(tmp_path, sp_model):
  record = {"article": "The class statement defines a class.", "id": "x",
            "questions": ["A class is _ .", "What does it define?"],
            "options": [["a type", "a list", "a value", "a name"],
                        ["a class", "a module", "a string", "a number"]],
            "answers": ["A", "A"]}
  write_race(tmp_path, "dev", "middle", [record])
  write_race(tmp_path, "dev", "high", [dict(record, options=[["a", "b"], ["a", "b", "c", "d"]])])
  report = ReadReport()
  questions = read_race(str(tmp_path), "dev", report)
  assert len(questions) == 3 and "2 options instead of 4" in next(iter(report.skipped))
  assert option_text("A class is _ .", "a type") == "A class is a type ."
  assert option_text("What does it define?", "a class") == "What does it define? a class"
  features = encode_race(XLNetTokenizer(sp_model), questions, 32)
  assert features["input_ids"].shape == (3, 4, 32)
  assert features["label"].tolist() == [0, 0, 0] and features["level"].tolist() == [0, 0, 1]


def test_race_cli(tmp_path, sp_model):
  rng = np.random.default_rng(0)
  words = ["class", "module", "value", "object"]
  for split in ("train", "dev"):
    for level in ("middle", "high"):
      records = []
      for _ in range(4):
        answer = int(rng.integers(4))
        records.append({"article": f"The answer is {words[answer]}.", "id": "q",
                        "questions": ["The answer is _ ."], "options": [words],
                        "answers": ["ABCD"[answer]]})
      write_race(tmp_path / "RACE", split, level, records)
  XLNetConfig.preset("tiny", n_token=XLNetTokenizer(sp_model).vocab_size).to_json_file(
      str(tmp_path / "config.json"))
  result = run_tool(
      "run/race.py", f"--data_dir={tmp_path}/RACE", f"--sp_path={sp_model}",
      f"--model_config={tmp_path}/config.json", "--max_seq_length=24", "--train_batch_size=4",
      "--train_steps=4", "--warmup_steps=1", "--save_steps=2", f"--output_dir={tmp_path}/out",
      "--do_train", "--do_eval")
  assert result.returncode == 0, result.stderr[-3000:]
  # It saved what resumes it at step 2 and, finished, keeps only what says so.
  assert os.listdir(tmp_path / "out" / "checkpoints") == ["finished.json"]
  scores = json.load(open(tmp_path / "out" / "dev_metrics.json"))
  assert set(scores) == {"accuracy", "middle", "high"}
  assert re.findall(r"^step (\d)/4: dev accuracy", result.stdout, re.M) == ["4"]
  # best/ holds the tokenizer the run read text with, and its packed length (for the export).
  best = tmp_path / "out" / "best"
  assert (best / "spiece.model").read_bytes() == open(sp_model, "rb").read()
  assert json.load(open(best / "preprocessor.json")) == {"sequence_length": 24,
                                                         "num_segments": 1}
