"""A run's options as one tree (training.run_config): written whole, read back equal, read
strictly (one line naming the file and the dotted key), compared field by field."""

import dataclasses
import json
from typing import Dict, List, Optional, Tuple, Union

import pytest

from xlnet_tf.training import run_config
from xlnet_tf.training.options import OptimizerOptions, RuntimeOptions
from xlnet_tf.utils.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class Inner:
  rate: float = 0.5
  name: Optional[str] = None
  scale: Union[None, float, str] = None


@dataclasses.dataclass(frozen=True)
class Tree:
  steps: int                       # required
  inner: Inner = Inner()
  optimizer: OptimizerOptions = OptimizerOptions()
  runtime: RuntimeOptions = RuntimeOptions()
  flag: bool = True
  sizes: Tuple[int, ...] = (1, 2)
  pair: Tuple[int, str] = (3, "a")
  names: List[str] = dataclasses.field(default_factory=list)
  table: Dict[str, float] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    if self.steps < 1:
      raise UserInputError(f"steps={self.steps}: must be positive")


ODD = Tree(steps=7, inner=Inner(rate=2.0, name="x", scale="dynamic"),
           optimizer=OptimizerOptions(learning_rate=3e-4, clip_norm=None),
           runtime=RuntimeOptions(seed=11, dtype="bfloat16"), flag=False, sizes=(5, 6, 7),
           pair=(9, "b"), names=["p", "q"], table={"k": 0.25})


def test_a_tree_round_trips_through_its_file(tmp_path):
  path = run_config.write(str(tmp_path / "model"), ODD)
  assert path == str(tmp_path / "model" / run_config.RUN_CONFIG_FILE)
  recorded = json.loads((tmp_path / "model" / run_config.RUN_CONFIG_FILE).read_text())
  assert recorded["optimizer"]["clip_norm"] is None and recorded["sizes"] == [5, 6, 7]
  assert recorded["inner"] == {"rate": 2.0, "name": "x", "scale": "dynamic"}
  read = run_config.read(path, Tree)
  assert read == ODD and type(read.sizes) is tuple and type(read.names) is list
  assert run_config.differences(read, ODD) == []
  # A field left out keeps its default; a float written as an integer is a float.
  (tmp_path / "short.json").write_text('{"steps": 2, "inner": {"rate": 1}}')
  short = run_config.read(str(tmp_path / "short.json"), Tree)
  assert short == Tree(steps=2, inner=Inner(rate=1.0)) and type(short.inner.rate) is float


# (file text, the message after "PATH: ")
BAD_FILES = {
    "unknown key": ('{"steps": 1, "stpes": 2}', "stpes: unknown key (did you mean steps?)"),
    "unknown nested key": ('{"steps": 1, "optimizer": {"learning_rat": 1}}',
                           "optimizer.learning_rat: unknown key (did you mean "
                           "optimizer.learning_rate?)"),
    "a string for an integer": ('{"steps": "7"}', "steps: expected an integer, got '7'"),
    "a bool for an integer": ('{"steps": true}', "steps: expected an integer, got True"),
    "a float for an integer": ('{"steps": 1.5}', "steps: expected an integer, got 1.5"),
    "an integer for a bool": ('{"steps": 1, "flag": 1}', "flag: expected true or false, got 1"),
    "a number for a group": ('{"steps": 1, "runtime": 3}',
                             "runtime: expected an object of RuntimeOptions's fields, got 3"),
    "a list for a union": ('{"steps": 1, "inner": {"scale": [1]}}',
                           "inner.scale: expected null or a number or a string, got [1]"),
    "a wrong list item": ('{"steps": 1, "sizes": [1, "2"]}',
                          "sizes[1]: expected an integer, got '2'"),
    "a pair of three": ('{"steps": 1, "pair": [1, "a", 2]}',
                        "pair: expected a list, got [1, 'a', 2]"),
    "a missing required field": ('{"inner": {}}', "steps: missing (a required field)"),
    "a value the options refuse": ('{"steps": 0}', "Tree: steps=0: must be positive"),
    "a list, not an object": ("[1, 2]", "the run config: expected an object of Tree's fields, "
                                        "got [1, 2]"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_faulty_file_is_one_line_naming_the_file_and_the_key(tmp_path, case):
  text, message = BAD_FILES[case]
  path = tmp_path / "run_config.json"
  path.write_text(text)
  with pytest.raises(UserInputError) as raised:
    run_config.read(str(path), Tree)
  assert str(raised.value) == f"{path}: {message}"


def test_a_file_that_is_not_json_or_not_there_is_one_line(tmp_path):
  path = tmp_path / "run_config.json"
  path.write_text('{"steps": 1,')
  with pytest.raises(UserInputError, match=rf"^{path}: not valid JSON \(.*\)$"):
    run_config.read(str(path), Tree)
  with pytest.raises(UserInputError, match=rf"^{tmp_path}/none.json: no such run config file$"):
    run_config.read(str(tmp_path / "none.json"), Tree)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["run_config.json"]  # nothing written


def test_a_tree_that_cannot_be_written_leaves_no_file(tmp_path):
  with pytest.raises(TypeError, match="inner: object values have no JSON form"):
    run_config.write(str(tmp_path), Tree(steps=1, inner=object()))
  assert list(tmp_path.iterdir()) == []


def test_replace_sets_dotted_fields_checking_their_types():
  replaced = run_config.replace(ODD, {"optimizer.learning_rate": 1, "runtime.seed": 3,
                                      "steps": 9, "inner.scale": 4096})
  assert replaced.optimizer == dataclasses.replace(ODD.optimizer, learning_rate=1.0)
  assert (replaced.runtime.seed, replaced.steps, replaced.inner.scale) == (3, 9, 4096.0)
  assert (replaced.runtime.dtype, replaced.inner.name) == ("bfloat16", "x")  # the rest kept
  with pytest.raises(UserInputError, match=r"^--seed='3': expected an integer$"):
    run_config.replace(ODD, {"runtime.seed": "3"}, {"runtime.seed": "--seed"})
  with pytest.raises(KeyError, match="runtime.sed"):
    run_config.replace(ODD, {"runtime.sed": 3})
  with pytest.raises(KeyError, match="steps.x"):
    run_config.replace(ODD, {"steps.x": 3})


def test_differences_name_each_differing_field():
  changed = run_config.replace(ODD, {"optimizer.learning_rate": 1e-3, "runtime.seed": 0,
                                     "sizes": (5, 6), "table": {"k": 0.25, "j": 1.0}})
  assert run_config.differences(ODD, changed) == [
      "optimizer.learning_rate", "runtime.seed", "sizes", "table.j"]
  # A file's integer 1 and a float 1.0 are equal; true and 1 are not.
  as_file = run_config.to_dict(ODD)
  as_file["inner"]["rate"] = 2
  assert run_config.differences(as_file, ODD) == []
  as_file["flag"] = 0
  assert run_config.differences(as_file, ODD) == ["flag"]
  del as_file["flag"]
  assert run_config.differences(as_file, ODD) == ["flag"]


def test_names_lead_to_one_field_each_or_are_chosen():
  names = run_config.names_to_paths(Tree, chosen={"name": "inner.name"})
  assert names["learning_rate"] == "optimizer.learning_rate" and names["seed"] == "runtime.seed"
  assert names["name"] == "inner.name" and names["steps"] == "steps"
  assert len(run_config.field_paths(Tree)) == len(names)

  @dataclasses.dataclass
  class Twice:
    inner: Inner = Inner()
    other: Inner = Inner()
  with pytest.raises(TypeError, match="'rate' is inner.rate and other.rate; choose"):
    run_config.names_to_paths(Twice, chosen={"name": "inner.name", "scale": "other.scale"})
  with pytest.raises(TypeError, match="not one of its fields"):
    run_config.names_to_paths(Twice, chosen={"rate": "steps"})
