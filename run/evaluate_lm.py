"""`xlnet-evaluate-lm` from the checkout:
xlnet_tf/cli/evaluate_lm.py."""

from xlnet_tf.cli import evaluate_lm

if __name__ == "__main__":
  evaluate_lm.entry()
