"""The command-line tools (xlnet_tf.utils.cli): TensorFlow's logs silenced unless --verbose, user
errors as one line without a traceback, bugs with theirs."""

import subprocess
import sys
import textwrap

import pytest

from cli_output import run_tool, tensorflow_log_lines
from xlnet_tf import XLNetConfig
from xlnet_tf.utils.cli import verbose_requested

TOOL = textwrap.dedent("""
    import sys
    from xlnet_tf.utils import cli
    from xlnet_tf.utils.errors import UserInputError

    def main(argv):
      raise {error}

    cli.run(main)
    """)


def run_inline_tool(error, *arguments):
  """A tool whose main raises `error` (Python source), without TensorFlow."""
  return subprocess.run([sys.executable, "-c", TOOL.format(error=error), *arguments],
                        capture_output=True, text=True, timeout=120)


def test_a_user_error_is_one_line_and_a_bug_keeps_its_traceback():
  user_error = run_inline_tool("UserInputError('data.tsv:3: expected 2 columns, got 1')")
  assert user_error.returncode == 1
  assert user_error.stderr == "error: data.tsv:3: expected 2 columns, got 1\n"
  missing = run_inline_tool("FileNotFoundError('x.model: SentencePiece model not found')")
  assert (missing.returncode, missing.stderr) == (1, "error: x.model: SentencePiece model "
                                                     "not found\n")
  bug = run_inline_tool("TypeError('unsupported operand')")
  assert bug.returncode == 1 and "Traceback" in bug.stderr and "TypeError" in bug.stderr
  verbose = run_inline_tool("UserInputError('data.tsv:3: bad')", "--verbose")
  assert verbose.returncode == 1 and "Traceback" in verbose.stderr


@pytest.mark.parametrize("argv,verbose", [
    (["tool"], False), (["tool", "--verbose"], True), (["tool", "--verbose=false"], False),
    (["tool", "--verbose", "--noverbose"], False), (["tool", "-verbose=True"], True),
    (["tool", "--", "--verbose"], False), (["tool", "--verbose_level=1"], False)])
def test_verbose_is_read_from_the_command_line_as_absl_reads_it(argv, verbose):
  assert verbose_requested(argv) == verbose


def test_a_tool_that_loads_tensorflow_prints_only_the_error_unless_verbose(tmp_path):
  missing = tmp_path / "missing"
  quiet = run_tool("run/pretrain.py", f"--train_data={missing}", fresh_process=True)
  assert quiet.returncode == 1
  assert quiet.stderr.splitlines() == [f"error: {missing}: no record info; pretraining data is "
                                       "made by data/create_pretraining_data.py, which writes "
                                       "it beside the files"]
  verbose = run_tool("run/pretrain.py", f"--train_data={missing}", "--verbose",
                     fresh_process=True)
  assert verbose.returncode == 1
  assert "Traceback" in verbose.stderr and "FileNotFoundError" in verbose.stderr
  assert tensorflow_log_lines(verbose.stderr)  # TensorFlow's import-time lines are back


def test_a_bad_data_file_is_named_with_its_line(small_data, tmp_path):
  XLNetConfig.preset("tiny", n_token=500).to_json_file(str(tmp_path / "xlnet_config.json"))
  data = tmp_path / "train.tsv"
  data.write_text("review\tlabel\nclass value\t1\n")
  result = run_tool("run/classifier.py", "--task_name=generic", f"--train_file={data}",
                    "--labels=0,1", "--do_train", f"--sp_path={small_data['sp_path']}",
                    f"--model_config={tmp_path}/xlnet_config.json", f"--output_dir={tmp_path}")
  assert result.returncode == 1
  lines = result.stderr.splitlines()
  assert len(lines) == 1 and lines[0].startswith(
      f"error: {data}:1: no text column among ['review', 'label']; name one ")


def test_a_data_tool_names_the_flag(tmp_path):
  result = run_tool("data/train_sentencepiece.py", f"--input_glob={tmp_path}/*.txt")
  assert result.returncode == 1
  assert result.stderr == f"error: --input_glob='{tmp_path}/*.txt' matches no file\n"
