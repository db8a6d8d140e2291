"""bfv-bag from Python: veil.Client(protocol="bfv-bag") and veil.PrivatePooledEmbeddingBag against
a real veil-server on loopback."""

import os
import subprocess

import pytest
import torch

import veil
from veil import _build

ROWS, DIM = 40, 3


@pytest.fixture(scope="module")
def bag_server(tmp_path_factory):
    """A tagged fixed-point table (linear MAC, kind 4) served by one bfv-bag server; its values
    are on a 1/16 grid, so every pooled sum below is exact in float32 too."""
    values = (torch.arange(ROWS * DIM, dtype=torch.float32).reshape(ROWS, DIM) - 50) / 16
    folder = tmp_path_factory.mktemp("bag")
    rows = folder / "rows.csv"
    rows.write_text("\n".join(",".join(f"{v:.4f}" for v in row) for row in values.tolist()) + "\n")
    table = str(folder / "table.veil")
    subprocess.run([os.path.join(_build.BIN_DIR, "veil"), "table", "build", f"--csv={rows}",
                    "--format=fixed", "--row-tag-kind=4", f"--out={table}"], check=True,
                   capture_output=True)
    with veil.local_servers(table, protocol="bfv-bag") as server:
        yield server, values, f"{table}.rowkey"


def test_pooled_sums_are_exact(bag_server):
    server, values, key = bag_server
    assert len(server.addresses) == 1
    client = server.client(row_key=key)
    table = client.table
    assert (table["rows"], table["dim"], table["protocol"]) == (ROWS, DIM, "bfv-bag")
    assert table["row_tag"].startswith("linear mac61")
    assert table["query_blocks"] == 1 and table["key_bytes"] > 0
    bags, weights = [[1, 2, 3], [7], [4, 4]], [[1, -2, 3], [2**25], [2, 1]]
    fixed = (values * 2**table["frac_bits"]).to(torch.int64)
    expected = torch.stack([sum(w * fixed[r] for r, w in zip(b, ws))
                            for b, ws in zip(bags, weights)])
    assert torch.equal(client.lookup_pooled_sums(bags, weights), expected)
    pooled = client.lookup_pooled(bags[:1], weights[:1])
    assert torch.equal(pooled, (1 * values[1] - 2 * values[2] + 3 * values[3]).unsqueeze(0))
    mean = client.lookup_pooled([[5, 6, 9, 10]], mode="mean")
    assert torch.equal(mean, values[[5, 6, 9, 10]].mean(0, keepdim=True))
    # A row is a bag of one.
    assert torch.equal(client.lookup([0, ROWS - 1, 0]), values[[0, ROWS - 1, 0]])
    call = client.last_call()
    assert call["lookups"] == 3 and call["bytes_up"] >= 3 * table["query_bytes"]
    assert client.stats()["keys"] >= 3
    # The same sums with the queries encrypted on one thread and on three.
    for threads in (1, 3):
        assert torch.equal(server.client(row_key=key, threads=threads)
                           .lookup_pooled_sums(bags, weights), expected)


def test_what_bfv_bag_does_not_do_and_bad_arguments_are_clear_errors(bag_server):
    server, _, key = bag_server
    client = server.client(row_key=key)
    for call in (lambda: client.lookup_words([1]), lambda: client.lookup_layout(None, [1])):
        with pytest.raises(veil.Error) as unimplemented:
            call()
        assert unimplemented.value.code == veil.StatusCode.UNIMPLEMENTED
    with pytest.raises(veil.FailedPreconditionError, match="only the LWE protocols"):
        client.prepare_queries(1)
    with pytest.raises(veil.InvalidArgumentError, match="outside the table"):
        client.lookup([ROWS])
    with pytest.raises(veil.InvalidArgumentError, match="shape of bags"):
        client.lookup_pooled_sums([[1, 2]], [[1]])
    with pytest.raises(veil.InvalidArgumentError, match="int64"):
        client.lookup_pooled_sums([[1]], [[2**63]])
    with pytest.raises(veil.InvalidArgumentError, match="no bags"):
        client.lookup_pooled([])
    with pytest.raises(veil.InvalidArgumentError):
        client.stats(1)
    with pytest.raises(veil.InvalidArgumentError, match="one server"):
        veil.Client(("127.0.0.1:1", "127.0.0.1:2"), protocol="bfv-bag")
    with pytest.raises(veil.InvalidArgumentError, match="hint"):
        veil.Client(server.addresses[0], protocol="bfv-bag", hint_cache="hints")
    with pytest.raises(veil.InvalidArgumentError, match="threads must be 0"):
        server.client(row_key=key, threads=-1)
    with pytest.raises(veil.InvalidArgumentError, match="threads is 1099511627776"):
        server.client(row_key=key, threads=2**40)
    with pytest.raises(veil.InvalidArgumentError, match="threads is -1099511627776"):
        server.client(row_key=key, threads=-2**40)
    with pytest.raises(veil.InvalidArgumentError, match="bfv-bag only, not of dpf2"):
        veil.Client(("127.0.0.1:1", "127.0.0.1:2"), threads=2)
    # The client still works after all of these.
    assert client.lookup_pooled_sums([[2]]).shape == (1, DIM)
    # A tagged table needs its row key; the other protocols have no exact sums.
    with pytest.raises(veil.FailedPreconditionError, match="row key"):
        server.client()


def test_a_sum_that_fails_its_tag_is_data_loss(bag_server, tmp_path):
    """With another key every sum fails its tag: DataLossError, then no more lookups; with a
    failure latch, no more lookups by any client given it until the file is removed."""
    server, _, key = bag_server
    wrong = tmp_path / "wrong.rowkey"
    wrong.write_text("00" * 16 + "\n")
    latch = tmp_path / "latch"
    client = server.client(row_key=str(wrong), failure_latch=latch)
    with pytest.raises(veil.DataLossError) as error:
        client.lookup_pooled([[1, 2]])
    assert error.value.code == veil.StatusCode.DATA_LOSS
    assert latch.exists()
    with pytest.raises(veil.FailedPreconditionError):
        client.lookup_pooled([[1, 2]])
    with pytest.raises(veil.FailedPreconditionError, match="failure latch"):
        server.client(row_key=key, failure_latch=latch)
    latch.unlink()
    assert server.client(row_key=key, failure_latch=latch).lookup_pooled_sums([[1]]).shape == (1, DIM)


def test_private_pooled_embedding_bag_pools_like_embedding_bag(bag_server):
    server, values, key = bag_server
    client = server.client(row_key=key)
    reference = torch.nn.EmbeddingBag.from_pretrained(values, mode="sum")
    bag = veil.PrivatePooledEmbeddingBag.from_client(client, mode="sum")
    assert (bag.num_embeddings, bag.embedding_dim) == (ROWS, DIM)
    assert list(bag.parameters()) == []
    input = torch.tensor([3, 9, 9, 0, 39, 17])
    offsets = torch.tensor([0, 2, 2, 5])  # the third bag is empty: zeros
    weights = torch.tensor([0.5, -2.0, 1.0, 4.0, 0.25, 1.0])
    out = bag(input, offsets, per_sample_weights=weights)
    assert torch.equal(out, reference(input, offsets, per_sample_weights=weights))
    assert out[1].abs().sum() == 0
    assert bag.last_call()["keys"] == 4  # one query per bag, the empty one included
    mean = veil.PrivatePooledEmbeddingBag(ROWS, DIM, "mean", client=client)
    two_d = torch.tensor([[1, 2], [30, 31]])
    assert torch.allclose(mean(two_d), values[two_d].mean(1))
    with pytest.raises(veil.InvalidArgumentError, match="outside"):
        bag(torch.tensor([ROWS]), torch.tensor([0]))
    with pytest.raises(veil.InvalidArgumentError, match="embeddings, the server's table"):
        veil.PrivatePooledEmbeddingBag(ROWS + 1, DIM, client=client)
    # A client of another protocol (never connected) is refused.
    other = veil.Client.__new__(veil.Client)
    other.protocol, other._native = "dpf2", None
    with pytest.raises(veil.InvalidArgumentError, match="bfv-bag server"):
        veil.PrivatePooledEmbeddingBag(ROWS, DIM, client=other)


def test_a_server_gone_is_unavailable(tmp_path):
    """The module reports the client's error code, not a generic torch error."""
    values = torch.arange(20 * 2, dtype=torch.float32).reshape(20, 2)
    path = str(tmp_path / "t.veil")
    veil.table.build(values, format="fixed", path=path)
    with veil.local_servers(path, protocol="bfv-bag") as server:
        client = server.client(timeout=5)
        bag = veil.PrivatePooledEmbeddingBag.from_client(client, mode="sum")
        assert torch.equal(bag(torch.tensor([[1, 2]])), values[[1]] + values[[2]])
        server.kill(0)
        with pytest.raises(veil.Error) as error:
            bag(torch.tensor([[1, 2]]))
        assert error.value.code in (veil.StatusCode.UNAVAILABLE,
                                    veil.StatusCode.DEADLINE_EXCEEDED)
