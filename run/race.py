"""`xlnet-race` from the checkout:
xlnet_tf/cli/race.py."""

from xlnet_tf.cli import race

if __name__ == "__main__":
  race.entry()
