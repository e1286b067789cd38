"""`xlnet-context-study` from the checkout:
xlnet_tf/cli/context_study.py."""

from xlnet_tf.cli import context_study

if __name__ == "__main__":
  context_study.entry()
