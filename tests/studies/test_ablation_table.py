"""The variants side by side: gains, intrinsic summaries and the figure, on results built by
hand."""

import os

from xlnet_tf.studies import ablation_table


def _scores(exact_by_order):
  """Intrinsic scores of 1-4-word blanks: {order: exact} at every length, cloze 0.5."""
  return {str(words): {"infilling": {order: {"exact": value * words, "pieces": 0.0}
                                     for order, value in exact_by_order.items()},
                       "cloze": {"accuracy": 0.25 * words, "examples": 10}}
          for words in (1, 2, 3, 4)}


def _results():
  def row(median, low, high):
    return {"test_median": median, "test_min": low, "test_max": high}
  return {
      "pretraining": {
          "perm": {"overrides": {}, "held_out": [{"loss": 9.0}, {"loss": 3.25}]},
          "mlm": {"overrides": {"objective": "mlm"}, "held_out": [{"loss": 3.5}]}},
      "finetuning": {
          "a": {"random_init": row(0.40, 0.39, 0.41), "perm": row(0.45, 0.44, 0.47),
                "mlm": row(0.42, 0.40, 0.43)},
          "b": {"random_init": row(0.60, 0.6, 0.6), "perm": row(0.61, 0.6, 0.62),
                "mlm": row(0.70, 0.69, 0.71)}},
      "intrinsic": {"perm": _scores({"left_to_right": 0.1, "independent": 0.05}),
                    "mlm": _scores({"independent": 0.02, "confidence": 0.03})}}


def test_rows_give_gains_over_random_init_their_mean_and_the_best_order(tmp_path):
  table = ablation_table.ablation_markdown(_results()).splitlines()
  assert table[2] == "| random_init |  | 40.0 | 60.0 |  |  |  |"
  # perm: +5.0 and +1.0 (mean +3.0); exact 2-4 in its best order: mean(0.2, 0.3, 0.4) = 30%;
  # cloze mean(0.5, 0.75, 1.0) = 75%.
  assert table[3] == ("| perm | 3.250 | 45.0 (+5.0) | 61.0 (+1.0) | +3.0 | 30.0 (left_to_right) "
                      "| 75.0 |")
  assert table[4] == "| mlm | 3.500 | 42.0 (+2.0) | 70.0 (+10.0) | +6.0 | 9.0 (confidence) | 75.0 |"
  assert ablation_table.exact_by_span(_results()["intrinsic"]["mlm"], "mlm") == {
      1: 0.03, 2: 0.06, 3: 0.09, 4: 0.12}
  path = ablation_table.plot_ablation(_results(), str(tmp_path / "variants.png"))
  assert os.path.getsize(path) > 10_000
