"""Reads TensorBoard event files with TensorBoard's own reader and prints every scalar as JSON:
{"tag": [[step, value, wall_time], ...], ...}. Used by the tests to check what the studio writes.
usage: read_tensorboard.py LOGDIR"""
import json
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError as e:  # the test says what to do
    print(f"the tensorboard package is missing ({e}): run scripts/setup.sh", file=sys.stderr)
    sys.exit(3)

acc = event_accumulator.EventAccumulator(sys.argv[1], size_guidance={event_accumulator.SCALARS: 0})
acc.Reload()
print(json.dumps({tag: [[s.step, s.value, s.wall_time] for s in acc.Scalars(tag)]
                  for tag in acc.Tags()["scalars"]}))
