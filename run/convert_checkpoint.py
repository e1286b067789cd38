"""`xlnet-convert` from the checkout:
xlnet_tf/cli/convert_checkpoint.py."""

from xlnet_tf.cli import convert_checkpoint

if __name__ == "__main__":
  convert_checkpoint.entry()
