"""Settings of the whole suite."""
import os

# Tests check the compiled kernels: a plan must not move a unit to NumPy, nor a tape keep
# its NumPy replay, because NumPy happened to time faster on a busy machine (choice.py;
# test_choice.py turns the measurement on).  Here, not in tests/compiled_tape's conftest
# alone: the rules' and programs' compiled paths run without that folder too.
os.environ['TRACKED_NUMPY_CHOICE'] = '0'

# The eager recording methods built as native code (tracked/native_ops.py) are installed by
# the first backward pass, in the background: here at once, so that every test records
# through them (tests/test_native_ops.py compares them with boxes.py's Python methods).
from tracked import native_ops  # noqa: E402

if native_ops.available():
    native_ops.install()
