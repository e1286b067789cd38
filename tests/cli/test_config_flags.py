"""A command's options from --config_file and its flags (xlnet_tf/cli/config_flags.py): the
file is the base and the flags given on the command line override it; without a file the
flags' values fill the preset; a file's paths must be given again."""

import dataclasses
from typing import Optional

from absl import app
from absl import flags
import pytest

from xlnet_tf.cli import config_flags
from xlnet_tf.training import run_config
from xlnet_tf.training.options import OptimizerOptions, RuntimeOptions
from xlnet_tf.utils.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class Options:
  train_steps: int = 100
  data_dir: Optional[str] = None
  optimizer: OptimizerOptions = OptimizerOptions()
  runtime: RuntimeOptions = RuntimeOptions()


PRESET = Options(train_steps=600, optimizer=OptimizerOptions(learning_rate=2e-3, clip_norm=0.5))
MAPPING = {"train_steps": "train_steps", "learning_rate": "optimizer.learning_rate",
           "clip": "optimizer.clip_norm", "seed": "runtime.seed", "data_dir": "data_dir"}


def _flags(*argv):
  values = flags.FlagValues()
  config_flags.define_config_file_flag(values)
  flags.DEFINE_integer("train_steps", None, "", flag_values=values)
  flags.DEFINE_float("learning_rate", None, "", flag_values=values)
  flags.DEFINE_float("clip", None, "", flag_values=values)
  flags.DEFINE_integer("seed", 0, "", flag_values=values)
  flags.DEFINE_string("data_dir", None, "", flag_values=values)
  flags.DEFINE_string("seed_text", None, "", flag_values=values)  # for a wrong mapping
  values(["tool", *argv])
  return values


def _options(*argv, paths=("data_dir",), mapping=MAPPING):
  return config_flags.options_from_flags(PRESET, mapping, paths, flag_values=_flags(*argv))


def test_without_a_file_the_flags_fill_the_preset():
  assert _options() == dataclasses.replace(PRESET, runtime=RuntimeOptions(seed=0))
  options = _options("--learning_rate=0.1", "--clip=2", "--seed=4", "--data_dir=d")
  assert options == Options(train_steps=600, data_dir="d",
                            optimizer=OptimizerOptions(learning_rate=0.1, clip_norm=2.0),
                            runtime=RuntimeOptions(seed=4))


def test_the_flags_given_override_the_file(tmp_path):
  recorded = Options(train_steps=7, optimizer=OptimizerOptions(learning_rate=0.3, clip_norm=None),
                     runtime=RuntimeOptions(seed=9, dtype="bfloat16"))
  path = run_config.write(str(tmp_path), recorded)
  # Only what the command line gives changes; --seed's default 0 does not replace the file's 9.
  assert _options(f"--config_file={path}") == recorded
  options = _options(f"--config_file={path}", "--learning_rate=0.01", "--train_steps=8")
  assert options == dataclasses.replace(
      recorded, train_steps=8, optimizer=OptimizerOptions(learning_rate=0.01, clip_norm=None))


def test_a_file_s_paths_must_be_given_again(tmp_path):
  path = run_config.write(str(tmp_path), Options(data_dir="/elsewhere"))
  with pytest.raises(app.UsageError) as raised:
    _options(f"--config_file={path}")
  assert str(raised.value) == (f"--config_file={path}: data_dir is '/elsewhere'; a config file's "
                               "paths are not followed: give --data_dir")
  assert _options(f"--config_file={path}", "--data_dir=here").data_dir == "here"


def test_a_faulty_file_or_a_flag_of_the_wrong_type_is_one_line(tmp_path):
  path = tmp_path / "run_config.json"
  path.write_text('{"optimizer": {"clip_nrom": 1}}')
  with pytest.raises(UserInputError) as raised:
    _options(f"--config_file={path}", "--seed=3")
  assert str(raised.value) == (f"{path}: optimizer.clip_nrom: unknown key (did you mean "
                               "optimizer.clip_norm?)")
  with pytest.raises(UserInputError, match=r"^--seed_text='x': expected an integer$"):
    _options("--seed_text=x", mapping={**MAPPING, "seed_text": "runtime.seed"})
  with pytest.raises(KeyError, match="not_a_flag"):
    _options(mapping={"not_a_flag": "train_steps"})


def test_flag_names_show_the_flag_of_a_field():
  assert config_flags.flag_names(MAPPING, ["optimizer.clip_norm", "runtime.dtype"]) == [
      "--clip (optimizer.clip_norm)", "runtime.dtype"]
