"""run/transfer.py on bad input: exit 1, one line naming the flag or file, nothing written."""

import os

import pytest

from cli_output import run_tool

CASES = {
    "unknown variant": (["--variants=perm,bert"], "error: --variants: unknown 'bert'; known: "),
    "variants file not JSON": (["--variants_json={tmp}/bad.json"],
                               "error: {tmp}/bad.json: not valid JSON"),
    "variant not an object": (["--variants_json={tmp}/number.json"],
                              "error: --variants_json={tmp}/number.json: variant 'k3' is not an "
                              "object"),
    "unknown variant setting": (["--variants_json={tmp}/unknown.json"],
                                "error: variant 'k3': unknown settings ['mask_prob']"),
    "bad variant value": (["--variants_json={tmp}/zero.json"],
                          "error: variant 'k3': PretrainingDataConfig.num_predict must be "),
    "seeds not integers": (["--seeds=0,x"], "error: --seeds: ['0', 'x'] are not integers"),
    "learning rates not numbers": (["--learning_rates=1e-3,fast"],
                                   "error: --learning_rates: ['1e-3', 'fast'] are not numbers"),
    "task without a directory": (["--task=section"], "error: --task='section': expected NAME:DIR"),
    "task without its splits": (["--task=x:{tmp}"], "error: --task='x:{tmp}': {tmp} has no "
                                                   "train.jsonl/.tsv/.csv"),
    "snapshot past the budget": (["--snapshots=50", "--pretrain_steps=20"],
                                 "error: --snapshots: '50' is not a step between 0 and "
                                 "--pretrain_steps=20"),
    "no corpus": (["--input_glob={tmp}/none/*.txt"],
                  "error: --input_glob='{tmp}/none/*.txt' matches no file"),
}
FILES = {"bad.json": "{not json", "number.json": '{"k3": 42}',
         "unknown.json": '{"k3": {"mask_prob": 0.2}}', "zero.json": '{"k3": {"num_predict": 0}}'}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_and_leaves_nothing(tmp_path, case):
  flags, expected = CASES[case]
  for name, text in FILES.items():
    (tmp_path / name).write_text(text)
  (tmp_path / "corpus.txt").write_text("A line of text.\n\nAnother document.\n")
  task = tmp_path / "task"
  task.mkdir()
  for split in ("train", "dev", "test"):
    (task / f"{split}.jsonl").write_text('{"text": "a", "label": "x"}\n')
  defaults = {"--input_glob": f"{tmp_path}/corpus.txt", "--task": f"t:{task}"}
  given = [flag.format(tmp=tmp_path) for flag in flags]
  given += [f"{k}={v}" for k, v in defaults.items() if not any(f.startswith(k + "=") for f in
                                                               given)]
  out = tmp_path / "out"
  result = run_tool("run/transfer.py", *given, f"--output_dir={out}")
  assert result.returncode == 1, result.stderr[-3000:]
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(expected.format(tmp=tmp_path)), lines
  assert not os.path.exists(out)
