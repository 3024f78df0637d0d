"""tracked/show.py: models print Flux's way (the Flux pages' listings, with our names)."""
import numpy as np

import tracked as tr


def flux_page_model(dtype=np.float64):
    # Chain(Dense(28^2 => 32, sigmoid), Dense(32 => 10), softmax)  # from model zoo
    return tr.Chain(tr.Dense(28 ** 2, 32, tr.sigmoid, dtype=dtype), tr.Dense(32, 10, dtype=dtype),
                    tr.softmax)


def test_single_layer_line():
    assert str(tr.Dense(784, 32, tr.sigmoid)) == 'Dense(784 => 32, sigmoid)  # 25_120 parameters'
    assert str(tr.Dense(2, 3)) == 'Dense(2 => 3)       # 9 parameters'
    assert str(tr.BatchNorm(4)) == 'BatchNorm(4)        # 8 parameters, plus 8 non-trainable'
    assert str(tr.Dropout(0.5)) == 'Dropout(0.5)'
    assert repr(tr.Dense(784, 32, tr.sigmoid)) == 'Dense(784 => 32, sigmoid)'


def test_chain_listing_and_total():
    m = flux_page_model(np.float32)
    assert str(m) == (
        'Chain(\n'
        '  Dense(784 => 32, sigmoid),            # 25_120 parameters\n'
        '  Dense(32 => 10),                      # 330 parameters\n'
        '  softmax,\n'
        ')                  # Total: 4 arrays, 25_450 parameters, 99.414 KiB.')
    assert repr(m) == 'Chain(Dense(784 => 32, sigmoid), Dense(32 => 10), softmax)'
    small = tr.Chain(tr.Dense(2, 2))
    assert str(small) == 'Chain(\n  Dense(2 => 2),                        # 6 parameters\n)'


def test_nested_chain_with_state():
    m = tr.Chain(tr.Dense(2, 4, tr.tanh), tr.BatchNorm(4),
                 tr.Chain(tr.Dropout(0.2), tr.Dense(4, 2)))
    assert str(m) == (
        'Chain(\n'
        '  Dense(2 => 4, tanh),                  # 12 parameters\n'
        '  BatchNorm(4),                         # 8 parameters, plus 8\n'
        '  Chain(\n'
        '    Dropout(0.2),\n'
        '    Dense(4 => 2),                      # 10 parameters\n'
        '  ),\n'
        ')        # Total: 6 trainable arrays, 30 parameters,\n'
        '          # plus 2 non-trainable, 8 parameters, 304 bytes.')


def test_duplicated_repr_as_on_the_flux_page():
    dup = tr.Duplicated(flux_page_model(np.float32))
    assert repr(dup) == (
        'Duplicated(\n'
        '  Chain(\n'
        '    Dense(784 => 32, sigmoid),          # 25_120 parameters\n'
        '    Dense(32 => 10),                    # 330 parameters\n'
        '    softmax,\n'
        '  ),\n'
        '  # norm(∇) ≈ 0.0\n'
        ')                  # Total: 4 arrays, 25_450 parameters, 198.828 KiB.')


def test_format_bytes():
    f = tr.show.format_bytes
    assert (f(1), f(1023), f(1024), f(3 * 2 ** 20)) == ('1 byte', '1023 bytes', '1.000 KiB',
                                                        '3.000 MiB')
