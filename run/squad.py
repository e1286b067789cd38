"""`xlnet-squad` from the checkout:
xlnet_tf/cli/squad.py."""

from xlnet_tf.cli import squad

if __name__ == "__main__":
  squad.entry()
