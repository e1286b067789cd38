"""`xlnet-generate` from the checkout:
xlnet_tf/cli/generate.py."""

from xlnet_tf.cli import generate

if __name__ == "__main__":
  generate.entry()
