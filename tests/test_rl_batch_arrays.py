"""`BatchArrays`: a batch is stacked into an earlier one only when nothing outside holds it."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from devices.rl.batch_arrays import BatchArrays, fresh_array


def _frames(value: int, n: int = 4) -> list[np.ndarray]:
    return [np.full((6, 5, 3), value + i, dtype=np.uint8) for i in range(n)]


def _expected(value: int, n: int = 4) -> np.ndarray:
    return np.stack(_frames(value, n))


def test_a_dropped_batch_is_stacked_into_again() -> None:
    batches = BatchArrays()
    first = batches.stack(_frames(10))
    address = first.__array_interface__["data"][0]
    del first
    second = batches.stack(_frames(20))
    assert second.__array_interface__["data"][0] == address
    np.testing.assert_array_equal(second, _expected(20))
    assert (batches.made, batches.reused) == (1, 1)


@pytest.mark.parametrize(
    "hold",
    [
        lambda a: a,  # the array itself
        lambda a: a[1],  # a view of one screenshot
        lambda a: a[:, ::2],  # a strided view
        lambda a: {"screenshot": a},  # the observation dict a step returns
        lambda a: memoryview(a),  # a buffer over it (what torch.from_numpy and friends keep)
        lambda a: np.asarray(a),  # the same array under another name
        lambda a: a.reshape(-1),  # a reshaped view
    ],
    ids=["array", "view", "strided", "dict", "memoryview", "asarray", "reshape"],
)
def test_a_batch_someone_holds_is_never_written_over(hold) -> None:
    batches = BatchArrays()
    kept = hold(batches.stack(_frames(10)))
    gc.collect()
    for value in (20, 30, 40, 50, 60):  # more batches than it keeps
        np.testing.assert_array_equal(batches.stack(_frames(value)), _expected(value))
    array = kept["screenshot"] if isinstance(kept, dict) else np.asarray(kept)
    original = _expected(10)
    if isinstance(kept, memoryview) or array.size == original.size and array.ndim == 1:
        np.testing.assert_array_equal(array.reshape(original.shape), original)
    elif array.ndim == 3:
        np.testing.assert_array_equal(array, original[1])
    elif array.shape != original.shape:
        np.testing.assert_array_equal(array, original[:, ::2])
    else:
        np.testing.assert_array_equal(array, original)


def test_the_loop_that_holds_last_steps_observations_reuses_the_others() -> None:
    """``obs = env.step(policy(obs))``: while a step stacks, the caller still holds the last batch."""
    batches = BatchArrays()
    obs = batches.stack(_frames(0))
    for step in range(1, 20):
        new = batches.stack(_frames(step))
        assert obs[0, 0, 0, 0] == step - 1  # the batch still held was not written over
        obs = new
    assert batches.made == 2 and batches.reused == 18


def test_other_shapes_and_types_get_their_own_arrays() -> None:
    batches = BatchArrays()
    a = batches.stack(_frames(1))
    del a
    b = batches.stack(_frames(1, n=3))  # fewer environments stepped
    assert b.shape == (3, 6, 5, 3)
    del b
    c = batches.stack([f.astype(np.float32) for f in _frames(1)])
    assert c.dtype == np.float32
    assert batches.made == 3


def test_fresh_arrays_own_their_memory_and_leave_numpys_advice_as_it_was() -> None:
    from devices.rl import batch_arrays

    a = fresh_array((3, 4), np.dtype(np.uint16))
    assert a.flags.owndata and a.flags.writeable and a[1].base is a
    if batch_arrays._SWITCH is not None:
        before = batch_arrays._SWITCH(True)
        try:
            fresh_array((3, 4), np.dtype(np.uint8))
            assert batch_arrays._SWITCH(True) is True  # restored
        finally:
            batch_arrays._SWITCH(before)
