"""run/context_study.py and data/make_long_document_corpus.py on bad input: exit 1, one line
naming the flag, nothing written."""

import os

import pytest

from cli_output import run_tool

CASES = {
    "unknown variant": ("run/context_study.py", ["--variants=relative,rotary"],
                        "error: --variants: unknown ['rotary']; known: "),
    "seeds not integers": ("run/context_study.py", ["--seeds=0,a"],
                           "error: --seeds: ['0', 'a'] are not integers"),
    "one variant": ("run/context_study.py", ["--variants=relative"],
                    "error: RECL compares a group: give at least two variants"),
    "RECL lengths uneven": ("run/context_study.py", ["--recl_lengths=32,64,128"],
                            "error: --recl_lengths: context lengths must be evenly spaced"),
    "no manual pages": ("data/make_long_document_corpus.py", ["--man_root={tmp}/none"],
                        "error: {tmp}/none: no manual pages"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_and_leaves_nothing(tmp_path, case):
  script, flags, expected = CASES[case]
  corpus, out = tmp_path / "corpus", tmp_path / "out"
  if script.startswith("run/"):  # a corpus exists: the study stops at its own checks
    (corpus / "train").mkdir(parents=True)
    (corpus / "valid").mkdir()
    (corpus / "train" / "pages-000.txt").write_text("A line of text.\n")
    (corpus / "valid" / "pages-000.txt").write_text("A held-out line.\n")
    flags = flags + [f"--corpus_dir={corpus}"]
  result = run_tool(script, *[flag.format(tmp=tmp_path) for flag in flags],
                    f"--output_dir={out}")
  assert result.returncode == 1, result.stderr[-3000:]
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(expected.format(tmp=tmp_path)), lines
  assert not os.path.exists(out)
