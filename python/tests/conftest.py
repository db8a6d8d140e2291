"""Fixtures: small tables and layouts, and real veil-server pairs on loopback serving them."""

import os

import pytest
import torch

import veil

ROWS, DIM = 60, 8


def pytest_report_header(config):
    return f"veil package: {os.path.dirname(veil.__file__)}; torch {torch.__version__}"


@pytest.fixture(scope="session")
def weight():
    """The plaintext table, with values of every magnitude and sign (fp32 must come back
    bit-exact)."""
    generator = torch.Generator().manual_seed(20240611)
    w = torch.randn(ROWS, DIM, generator=generator) * torch.logspace(-6, 6, DIM)
    w[0, 0] = -0.0
    w[1, 1] = 1e-40  # subnormal
    return w


def _requests(seed, count, per_request):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, ROWS, (per_request,), generator=generator).tolist()
            for _ in range(count)]


@pytest.fixture(scope="session")
def full_layout():
    """One cold bin, 16 keys per inference: every request of at most 16 distinct rows is
    fetched whole."""
    prof = veil.codesign.profile(_requests(1, 200, 6), ROWS, top_k=2)
    return veil.codesign.layout(prof, DIM, hot_fraction=0, hot_bins=0, hot_rounds=0, cold_bins=1,
                                cold_rounds=16, colocation=0, seed=7)


@pytest.fixture(scope="session")
def tight_layout():
    """A hot table and four cold bins with one key each: larger requests lose rows."""
    prof = veil.codesign.profile(_requests(2, 200, 6), ROWS, top_k=2)
    return veil.codesign.layout(prof, DIM, hot_fraction=0.1, hot_bins=2, hot_rounds=1,
                                cold_bins=4, cold_rounds=1, colocation=1, seed=7)


def _serve(tmp_path_factory, weight, layout, name, **options):
    path = str(tmp_path_factory.mktemp(name) / "table.veil")
    veil.table.build(weight, format="fp32", path=path, layout=layout, epoch=3)
    return veil.local_servers(path, **options)


@pytest.fixture(scope="session")
def full_servers(tmp_path_factory, weight, full_layout):
    with _serve(tmp_path_factory, weight, full_layout, "full") as servers:
        yield servers


@pytest.fixture(scope="session")
def tight_servers(tmp_path_factory, weight, tight_layout):
    with _serve(tmp_path_factory, weight, tight_layout, "tight", tls=True) as servers:
        yield servers


@pytest.fixture(scope="session")
def plain_servers(tmp_path_factory, weight):
    """The table itself (no layout), fp32."""
    path = str(tmp_path_factory.mktemp("plain") / "table.veil")
    veil.table.build(weight, format="fp32", path=path)
    with veil.local_servers(path) as servers:
        yield servers


@pytest.fixture(scope="session")
def fixed_servers(tmp_path_factory):
    """A fixed-point table for pooled lookups: values on a 1/256 grid, exact in fixed point."""
    values = torch.arange(ROWS * DIM, dtype=torch.float32).reshape(ROWS, DIM) / 256 - 3
    path = str(tmp_path_factory.mktemp("fixed") / "table.veil")
    veil.table.build(values, format="fixed", path=path, frac_bits=16)
    with veil.local_servers(path) as servers:
        yield servers, values
