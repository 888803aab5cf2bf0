"""The refusal of a non-contiguous DLPack tensor names its strides with their sign, also when
the producer exported a negative byte stride divided as an unsigned number (as CuPy does for a
reversed view: -4 float64 elements arrive as 2305843009213693948)."""

from __future__ import annotations

import pytest
from dlpack_fakes import FakeCudaProducer

from renewable_huber import _dlpack
from renewable_huber.exceptions import BackendContractError


def _refusal(producer, bits=64) -> str:
    with pytest.raises(BackendContractError) as caught:
        with _dlpack.borrow(producer, "X", device_id=0, engine_stream=0, bits=bits, ndim=2):
            pytest.fail("the body must not run for a non-contiguous tensor")
    assert producer.deleter_calls == 1
    return str(caught.value)


def test_a_negative_stride_is_printed_with_its_sign():
    message = _refusal(FakeCudaProducer((3, 4), strides=(-4, 1)))
    assert "strides (-4, 1) in elements)" in message
    assert "reversed view" in message and "X.copy()" in message


@pytest.mark.parametrize("bits, exported, meant", [
    (64, 2**61 - 4, -4),        # (2**64 - 32) // 8
    (32, 2**62 - 3, -3),        # (2**64 - 12) // 4
    (64, 2**61 - 12, -12),
])
def test_a_stride_wrapped_by_unsigned_division_is_shown_as_the_producer_meant(bits, exported,
                                                                            meant):
    assert (2**64 + meant * (bits // 8)) // (bits // 8) == exported  # how the value arises
    message = _refusal(FakeCudaProducer((3, 4), bits=bits, strides=(exported, 1)), bits=bits)
    assert f"strides ({meant}, 1) in elements" in message
    assert f"the producer exported ({exported}, 1)" in message
    assert "reversed view" in message


def test_a_large_positive_stride_is_printed_as_it_is():
    message = _refusal(FakeCudaProducer((3, 4), strides=(2**40, 1)))
    assert f"strides ({2**40}, 1) in elements)" in message
    assert "producer exported" not in message and "reversed" not in message
