"""The one pretraining configuration (recipes.PretrainingRecipeOptions), its presets, its
backbone config and its record in the model directory."""

import dataclasses

import pytest

from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.pretraining import recipes
from xlnet_tf.training import resume
from xlnet_tf.training import run_config


def _leaves(value, prefix=""):
  """{dotted field path: value} of a dataclass and the dataclasses it holds."""
  if not dataclasses.is_dataclass(value):
    return {prefix: value}
  leaves = {}
  for field in dataclasses.fields(value):
    leaves.update(_leaves(getattr(value, field.name), f"{prefix}{field.name}."))
  return {path.rstrip("."): leaf for path, leaf in leaves.items()}


def test_presets_are_recipes_and_differ_only_where_documented():
  main, text = recipes.MAIN_JOB, recipes.FROM_TEXT
  assert isinstance(text, recipes.PretrainingRecipeOptions)
  main_leaves, text_leaves = _leaves(main), _leaves(text)
  changed = {path for path in main_leaves if main_leaves[path] != text_leaves[path]}
  assert changed == {"vocab_size", "training.optimizer.learning_rate",
                     "training.optimizer.warmup_steps", "held_out_every"}
  assert (text.vocab_size, text.training.optimizer.learning_rate,
          text.training.optimizer.warmup_steps) == (8000, 1e-3, 200)
  assert main.data == text.data  # one data layout, one copy of it


def test_replace_routes_data_names_to_the_data_settings():
  recipe = recipes.MAIN_JOB.replace(seq_len=64, reuse_len=32, learning_rate=5e-4,
                                    span_prediction=False)
  assert (recipe.data.seq_len, recipe.data.reuse_len, recipe.data.span_prediction) == (
      64, 32, False)
  assert recipe.data.perm_size == 32  # follows reuse_len unless given
  assert recipe.training.optimizer.learning_rate == 5e-4
  assert recipes.MAIN_JOB.data.seq_len == 128  # the preset is untouched
  given = recipes.MAIN_JOB.replace(seq_len=64, reuse_len=32, perm_size=16)
  assert given.data.perm_size == 16
  with pytest.raises(TypeError):
    recipes.MAIN_JOB.replace(not_a_setting=1)


def test_replace_validates_the_data_settings():
  with pytest.raises(UserInputError, match="reuse_len"):
    recipes.MAIN_JOB.replace(seq_len=64, reuse_len=64)


@pytest.mark.parametrize("from_text", [False, True])
def test_clm_preset_is_the_left_to_right_layout(from_text):
  recipe = recipes.recipe_for("clm", from_text)
  assert recipe.data.objective == "clm"
  assert (recipe.data.seq_len, recipe.data.reuse_len, recipe.mem_len, recipe.data.bi_data) == (
      32, 0, 128, False)
  assert recipe.vocab_size == (8000 if from_text else 2000)
  assert recipes.recipe_for("mlm", from_text).data.objective == "mlm"
  assert recipes.recipe_for("perm", from_text).data.seq_len == 128


def test_the_loop_options_are_the_recipes_training_with_the_runs_paths():
  recipe = recipes.FROM_TEXT.replace(train_steps=7, weight_decay=0.0, clip_norm=0.5,
                                     next_sentence=True, objective="mlm", seed=3)
  options = dataclasses.replace(recipe.training, model_dir="m", train_data="d", save_steps=3)
  assert (options.train_steps, options.optimizer.learning_rate,
          options.optimizer.warmup_steps) == (7, 1e-3, 200)
  assert (options.optimizer.weight_decay, options.optimizer.clip_norm, options.next_sentence) == (
      0.0, 0.5, True)
  assert (options.runtime.seed, options.model_dir, options.train_data, options.save_steps) == (
      3, "m", "d", 3)
  # The objective is the data's; the loop's own (a check against the data) is the run's.
  assert (recipe.data.objective, options.objective) == ("mlm", None)
  assert recipes.FROM_TEXT.training.model_dir is None  # the preset is untouched


def test_a_new_seq_len_alone_brings_its_layout():
  """reuse_len half of seq_len, num_predict the same 16% share, perm_size reuse_len; the
  default layout is the same rule's, and clm keeps its layout without memory."""
  recipe = recipes.MAIN_JOB.replace(seq_len=64)
  assert (recipe.data.seq_len, recipe.data.reuse_len, recipe.data.num_predict,
          recipe.data.perm_size) == (64, 32, 10, 32)
  assert recipes.MAIN_JOB.replace(seq_len=128).data == recipes.MAIN_JOB.data
  given = recipes.MAIN_JOB.replace(seq_len=64, reuse_len=16, num_predict=8)
  assert (given.data.reuse_len, given.data.num_predict, given.data.perm_size) == (16, 8, 16)
  # A short memory part: the share lowered to what it holds (half of the targets are there).
  short = recipes.MAIN_JOB.replace(reuse_len=8)
  assert (short.data.seq_len, short.data.num_predict, short.data.perm_size) == (128, 16, 8)
  clm = recipes.recipe_for("clm", from_text=True).replace(seq_len=64)
  assert (clm.data.seq_len, clm.data.reuse_len, clm.data.num_predict) == (64, 0, 21)


def test_each_setting_is_named_once_and_objective_is_the_data_s():
  """replace takes a setting's own name (one field each) or its dotted path; objective, which
  the loop's options also hold, is the data's by an explicit choice."""
  assert recipes.NAMES["objective"] == "data.objective"
  assert recipes.NAMES["learning_rate"] == "training.optimizer.learning_rate"
  assert recipes.NAMES["mem_len"] == "mem_len" and recipes.NAMES["seed"] == "training.runtime.seed"
  dotted = recipes.MAIN_JOB.replace(**{"training.objective": "mlm", "training.eval_every": 5})
  assert (dotted.training.objective, dotted.data.objective, dotted.training.eval_every) == (
      "mlm", "perm", 5)
  with pytest.raises(UserInputError, match=r"^training.train_steps='7': expected an integer$"):
    recipes.MAIN_JOB.replace(train_steps="7")


def test_the_recipe_builds_its_backbone_config():
  """mem_len, the size and the encoding go from the recipe to the config; the data decide the
  rest (reuse_len, bi_data, the attention); a config file keeps its encoding unless the recipe
  names one."""
  settings = recipes.MAIN_JOB.data.to_dict()
  config = recipes.MAIN_JOB.replace(model_size="tiny", mem_len=7).model_config(settings, 500)
  assert (config.mem_len, config.reuse_len, config.n_layer, config.n_token) == (7, 64, 2, 500)
  assert recipes.MAIN_JOB.replace(model_size="tiny").model_config(settings, 500).mem_len == 64
  clm = recipes.recipe_for("clm", False).replace(model_size="tiny", pos_encoding="shaw",
                                                 clamp_len=40)
  config = clm.model_config(clm.data.to_dict(), 500, dropout=0.0)
  assert (config.pos_encoding, config.clamp_len, config.mem_len, config.attn_type,
          config.dropout) == ("shaw", 40, 128, "uni", 0.0)


def test_a_recorded_run_is_resumed_only_with_its_settings(tmp_path):
  """resume_differences: nothing without checkpoints; with them the settings that changed,
  other than RESUMABLE ones (steps, logging, paths, ...)."""
  recipe = recipes.MAIN_JOB.replace(model_size="tiny", seq_len=32, train_steps=5)
  with recipes.recorded(str(tmp_path), recipe) as path:
    assert run_config.read(path, recipes.PretrainingRecipeOptions) == recipe
  changed = recipe.replace(learning_rate=1e-4, mem_len=3, seq_len=64, train_steps=9,
                           log_steps=1, model_dir="elsewhere", seed=2)
  assert recipes.resume_differences(str(tmp_path), changed) == []  # no checkpoint yet
  (tmp_path / resume.STATE_FILE).write_text("")
  assert recipes.resume_differences(str(tmp_path), changed) == [
      "mem_len", "data.seq_len", "data.reuse_len", "data.num_predict", "data.perm_size",
      "training.optimizer.learning_rate", "training.runtime.seed"]
  assert recipes.resume_differences(str(tmp_path), recipe.replace(train_steps=9)) == []


def test_a_run_that_fails_before_its_first_checkpoint_takes_its_record_back(tmp_path):
  recipe = recipes.MAIN_JOB.replace(train_steps=5)
  with pytest.raises(RuntimeError, match="the first step"):
    with recipes.recorded(str(tmp_path), recipe):
      raise RuntimeError("the first step")
  assert list(tmp_path.iterdir()) == []
  (tmp_path / resume.STATE_FILE).write_text("")  # a checkpoint: the record stays with it
  with pytest.raises(RuntimeError, match="a later step"):
    with recipes.recorded(str(tmp_path), recipe):
      raise RuntimeError("a later step")
  assert sorted(path.name for path in tmp_path.iterdir()) == [resume.STATE_FILE,
                                                              run_config.RUN_CONFIG_FILE]
  with recipes.recorded(str(tmp_path / "other"), recipe, chief=False):
    pass
  assert not (tmp_path / "other").exists()  # another worker writes no record
