"""The one pretraining configuration (recipes.Recipe) and its presets."""

import dataclasses

import pytest

from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.pretraining import recipes


def test_presets_are_recipes_and_differ_only_where_documented():
  main, text = recipes.MAIN_JOB, recipes.FROM_TEXT
  assert isinstance(text, recipes.Recipe)
  changed = {field.name for field in dataclasses.fields(recipes.Recipe)
             if getattr(main, field.name) != getattr(text, field.name)}
  assert changed == {"vocab_size", "learning_rate", "warmup_steps", "held_out_every"}
  assert (text.vocab_size, text.learning_rate, text.warmup_steps) == (8000, 1e-3, 200)
  assert main.data == text.data  # one data layout, one copy of it


def test_replace_routes_data_names_to_the_data_settings():
  recipe = recipes.MAIN_JOB.replace(seq_len=64, reuse_len=32, learning_rate=5e-4,
                                    span_prediction=False)
  assert (recipe.data.seq_len, recipe.data.reuse_len, recipe.data.span_prediction) == (
      64, 32, False)
  assert recipe.data.perm_size == 32  # follows reuse_len unless given
  assert recipe.learning_rate == 5e-4
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


def test_loop_options_carry_the_optimisation_and_budget():
  recipe = recipes.FROM_TEXT.replace(train_steps=7, weight_decay=0.0, clip_norm=0.5,
                                     next_sentence=True, objective="mlm")
  options = recipe.loop_options(model_dir="m", train_data="d", save_steps=3)
  assert (options.train_steps, options.learning_rate, options.warmup_steps) == (7, 1e-3, 200)
  assert (options.weight_decay, options.clip_norm, options.next_sentence) == (0.0, 0.5, True)
  assert (options.objective, options.model_dir, options.train_data, options.save_steps) == (
      "mlm", "m", "d", 3)
