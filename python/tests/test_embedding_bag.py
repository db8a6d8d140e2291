"""veil.PrivateEmbeddingBag in a Python model against two real servers: the same outputs as
torch.nn.EmbeddingBag over the plaintext table, bit for bit (fp32 rows)."""

import threading

import pytest
import torch

import veil
from conftest import DIM, ROWS


class Recommender(torch.nn.Module):
    """A small model whose embedding bag is either torch's or veil's."""

    def __init__(self, bag):
        super().__init__()
        self.bag = bag
        generator = torch.Generator().manual_seed(5)
        self.head = torch.nn.Linear(DIM, 1)
        with torch.no_grad():
            self.head.weight.copy_(torch.randn(1, DIM, generator=generator))
            self.head.bias.copy_(torch.randn(1, generator=generator))

    def forward(self, input, offsets, weights=None):
        pooled = self.bag(input, offsets, per_sample_weights=weights)
        if isinstance(pooled, veil.BagOutput):
            pooled = pooled.output
        return self.head(pooled).squeeze(1)


def _bags(seed, bags=5, max_size=4):
    generator = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, max_size + 1, (bags,), generator=generator)
    input = torch.randint(0, ROWS, (int(sizes.sum()),), generator=generator)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)[:-1]])
    return input, offsets


def _bitwise_equal(a, b):
    return a.shape == b.shape and torch.equal(a.view(torch.int32), b.view(torch.int32))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_model_matches_torch_embedding_bag_bit_exact(full_servers, full_layout, weight, mode):
    client = full_servers.client()
    private = veil.PrivateEmbeddingBag(ROWS, DIM, mode=mode, client=client, layout=full_layout)
    plain = torch.nn.EmbeddingBag.from_pretrained(weight, mode=mode)
    for seed in range(3):
        input, offsets = _bags(seed)
        with torch.no_grad():
            out, missing = private(input, offsets)
            expected = plain(input, offsets)
        assert _bitwise_equal(out, expected), (seed, out, expected)
        assert missing.dtype == torch.bool and missing.shape == input.shape
        assert not missing.any()
        private_model, plain_model = Recommender(private), Recommender(plain)
        with torch.no_grad():
            assert _bitwise_equal(private_model(input, offsets), plain_model(input, offsets))


def test_weighted_two_dimensional_and_last_offset_forms(full_servers, full_layout, weight):
    client = full_servers.client()
    input, offsets = _bags(11)
    weights = torch.linspace(-2, 3, input.numel())
    bag = veil.PrivateEmbeddingBag.from_client(client, full_layout, mode="sum")
    plain = torch.nn.EmbeddingBag.from_pretrained(weight, mode="sum")
    assert _bitwise_equal(bag(input, offsets, weights).output, plain(input, offsets, weights))

    grid = torch.randint(0, ROWS, (4, 3), generator=torch.Generator().manual_seed(3))
    out, missing = bag(grid)
    assert _bitwise_equal(out, plain(grid)) and missing.shape == grid.shape

    last = veil.PrivateEmbeddingBag(ROWS, DIM, mode="mean", include_last_offset=True,
                                    client=client, layout=full_layout)
    plain_last = torch.nn.EmbeddingBag.from_pretrained(weight, mode="mean",
                                                       include_last_offset=True)
    ends = torch.cat([offsets, torch.tensor([input.numel()])])
    assert _bitwise_equal(last(input, ends).output, plain_last(input, ends))


def test_fetch_once_pool_and_embed(full_servers, full_layout, weight):
    bag = veil.PrivateEmbeddingBag.from_client(full_servers.client(), full_layout)
    input, offsets = _bags(4)
    items = torch.tensor([input[0].item(), input[-1].item()])
    fetched = bag.fetch(torch.cat([input, items]))
    assert fetched.rows == sorted(set(torch.cat([input, items]).tolist()))
    assert fetched.call["keys"] == bag.keys_per_inference == 16
    mean = bag.pool(fetched, input, offsets).output
    total = bag.pool(fetched, input, offsets, mode="sum").output
    assert _bitwise_equal(mean, torch.nn.functional.embedding_bag(input, weight, offsets))
    assert _bitwise_equal(total, torch.nn.functional.embedding_bag(input, weight, offsets,
                                                                   mode="sum"))
    assert _bitwise_equal(bag.embed(fetched, items), weight[items])


def test_missing_rows_become_the_default_row(tight_servers, tight_layout, weight):
    default = weight.mean(0)
    bag = veil.PrivateEmbeddingBag(ROWS, DIM, mode="sum", client=tight_servers.client(),
                                   layout=tight_layout, default_row=default)
    assert torch.equal(bag.state_dict()["default_row"], default)
    input = torch.arange(0, ROWS, 3)  # 20 rows, far more than 4 cold keys can fetch
    offsets = torch.tensor([0, 7, 13])
    fetched = bag.fetch(input)
    assert fetched.missing_rows, "the tight layout must miss rows"
    out, missing = bag.pool(fetched, input, offsets)
    expected_weight = weight.clone()
    expected_weight[fetched.missing_rows] = default
    assert _bitwise_equal(out, torch.nn.functional.embedding_bag(input, expected_weight, offsets,
                                                                 mode="sum"))
    assert missing.tolist() == [r in fetched.missing_rows for r in input.tolist()]
    assert bag.keys_per_inference == sum(
        s["bins"] * s["rounds"] for s in (tight_layout.hot, tight_layout.cold))
    assert bag.last_call()["keys"] == bag.keys_per_inference


def test_concurrent_forwards_from_threads(full_servers, full_layout, weight):
    bag = veil.PrivateEmbeddingBag.from_client(full_servers.client(), full_layout, mode="sum")
    plain = torch.nn.EmbeddingBag.from_pretrained(weight, mode="sum")
    failures = []

    def run(seed):
        for i in range(3):
            input, offsets = _bags(100 * seed + i)
            with torch.no_grad():
                if not _bitwise_equal(bag(input, offsets).output, plain(input, offsets)):
                    failures.append((seed, i))

    threads = [threading.Thread(target=run, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_bad_arguments_raise_clear_errors(full_servers, full_layout):
    client = full_servers.client()
    with pytest.raises(veil.InvalidArgumentError, match="max_norm is not supported"):
        veil.PrivateEmbeddingBag(ROWS, DIM, max_norm=1.0, client=client, layout=full_layout)
    with pytest.raises(ValueError, match="sparse"):
        veil.PrivateEmbeddingBag(ROWS, DIM, sparse=True, client=client, layout=full_layout)
    with pytest.raises(veil.InvalidArgumentError, match="61 embeddings, the layout has 60 rows"):
        veil.PrivateEmbeddingBag(ROWS + 1, DIM, client=client, layout=full_layout)
    with pytest.raises(veil.InvalidArgumentError, match="mode \"median\""):
        veil.PrivateEmbeddingBag(ROWS, DIM, mode="median", client=client, layout=full_layout)
    with pytest.raises(veil.InvalidArgumentError, match="default row has 3 values"):
        veil.PrivateEmbeddingBag(ROWS, DIM, client=client, layout=full_layout,
                                 default_row=torch.zeros(3))
    bag = veil.PrivateEmbeddingBag.from_client(client, full_layout)
    with pytest.raises(veil.InvalidArgumentError, match="int32 or int64, not torch.float32"):
        bag(torch.tensor([1.0, 2.0]), torch.tensor([0]))
    with pytest.raises(veil.InvalidArgumentError, match=r"row 60 outside \[0, 60\)") as error:
        bag(torch.tensor([1, ROWS]), torch.tensor([0]))
    assert error.value.code == veil.StatusCode.INVALID_ARGUMENT
    with pytest.raises(veil.InvalidArgumentError, match="offsets"):
        bag(torch.tensor([1, 2]))  # 1-D input needs offsets
    with pytest.raises(veil.InvalidArgumentError, match="per_sample_weights"):
        bag(torch.tensor([1, 2]), torch.tensor([0]), torch.ones(2))  # mean mode
