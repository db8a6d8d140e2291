"""veil.Client against real servers: rows, words, pooled bags, layout lookups, statistics, TLS,
errors carrying their status codes, and local servers that never outlive their launcher."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

import veil
from veil import _build
from conftest import DIM, ROWS


def test_lookup_and_words_are_bit_exact(plain_servers, weight):
    client = plain_servers.client()
    table = client.table
    assert (table["rows"], table["dim"], table["format"]) == (ROWS, DIM, "fp32")
    assert table["digest"] == veil.table.verify(plain_servers.table)
    rows = [5, 0, ROWS - 1, 5]
    values = client.lookup(rows)
    assert values.dtype == torch.float32 and values.shape == (4, DIM)
    assert torch.equal(values.view(torch.int32), weight[rows].view(torch.int32))
    assert torch.equal(client.lookup_words(torch.tensor(rows)), weight[rows].view(torch.int32))
    assert torch.equal(client.lookup(np.array([1, 2], dtype=np.int32)), weight[[1, 2]])
    call = client.last_call()
    assert call["lookups"] == 2 and call["keys"] == 2 and call["bytes_up"] > 0


def test_pooled_bags_with_hidden_weights(fixed_servers):
    servers, values = fixed_servers
    client = servers.client()
    bags, weights = [[1, 2, 3], [7], [4, 4]], [[1, -2, 3], [5], [2, 1]]
    expected = torch.stack([sum(w * values[r] for r, w in zip(b, ws))
                            for b, ws in zip(bags, weights)])
    assert torch.equal(client.lookup_pooled(bags, weights), expected)
    mean = client.lookup_pooled([[1, 2, 3]], mode="mean")
    assert torch.allclose(mean, values[[1, 2, 3]].mean(0, keepdim=True), atol=1e-6)
    with pytest.raises(veil.InvalidArgumentError, match="shape of bags"):
        client.lookup_pooled(bags, [[1], [1], [1]])
    with pytest.raises(veil.InvalidArgumentError, match="no bags"):
        client.lookup_pooled([])


def test_pooled_needs_a_fixed_point_table(plain_servers):
    with pytest.raises(veil.FailedPreconditionError) as error:
        plain_servers.client().lookup_pooled([[1, 2]])
    assert error.value.code == veil.StatusCode.FAILED_PRECONDITION


def test_layout_lookup_values_and_missing_mask(tight_servers, tight_layout, weight):
    client = tight_servers.client()
    wanted = list(range(0, ROWS, 2))
    result = client.lookup_layout(tight_layout, wanted + wanted[:3])
    assert result.rows.tolist() == wanted
    assert result.missing.dtype == torch.bool and result.missing.any()
    fetched = ~result.missing
    assert torch.equal(result.values[fetched], weight[result.rows[fetched]])
    assert torch.equal(result.values[result.missing], torch.zeros(int(result.missing.sum()), DIM))
    assert result.call["keys"] == tight_layout.cost()["keys"]


def test_stats_count_the_keys(plain_servers):
    client = plain_servers.client()
    before = client.stats(0)
    client.lookup([1, 2, 3])
    after = client.stats(1)
    assert after["keys"] >= before["keys"] + 3 and after["connections"] >= 1
    with pytest.raises(veil.InvalidArgumentError):
        client.stats(2)


def test_tls_servers_need_their_certificate(tight_servers):
    assert tight_servers.tls_certs
    assert tight_servers.client().table["rows"] > 0
    with pytest.raises(veil.UnavailableError) as error:
        veil.Client(tight_servers.addresses, timeout=2)  # plaintext to a TLS server
    assert error.value.code == veil.StatusCode.UNAVAILABLE
    with pytest.raises(veil.NotFoundError):
        veil.Client(tight_servers.addresses, tls_certs="/nonexistent/trusted.pem")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_errors_carry_status_codes(plain_servers):
    with pytest.raises(veil.InvalidArgumentError):
        veil.Client(("", "127.0.0.1:1"))
    with pytest.raises(veil.InvalidArgumentError, match="two \"HOST:PORT\" addresses"):
        veil.Client("127.0.0.1:1")
    with pytest.raises(veil.UnavailableError, match="127.0.0.1"):
        veil.Client((plain_servers.addresses[0], f"127.0.0.1:{_free_port()}"), timeout=2)
    with pytest.raises(veil.Error) as error:
        veil.Client(plain_servers.addresses, protocol="sealpir")
    assert error.value.code == veil.StatusCode.UNIMPLEMENTED
    # A client of one protocol refuses a server of another.
    with pytest.raises(veil.FailedPreconditionError, match="speaks protocol"):
        veil.Client(plain_servers.addresses[0], protocol="bfv-bag")
    with pytest.raises(veil.InvalidArgumentError, match="unknown PRG 'rot13'"):
        veil.Client(plain_servers.addresses, prg="rot13")


def test_bad_rows_raise_invalid_argument(plain_servers):
    client = plain_servers.client()
    with pytest.raises(veil.InvalidArgumentError) as error:
        client.lookup([ROWS])
    assert error.value.code == veil.StatusCode.INVALID_ARGUMENT and "INVALID_ARGUMENT" in str(error.value)
    with pytest.raises(ValueError, match="negative"):
        client.lookup([-1])
    with pytest.raises(veil.InvalidArgumentError, match="integers"):
        client.lookup(torch.tensor([1.5]))
    with pytest.raises(veil.InvalidArgumentError):
        client.lookup([])
    client.close()
    with pytest.raises(veil.FailedPreconditionError, match="closed"):
        client.lookup([1])


def test_a_dead_server_fails_lookups_naming_it(tmp_path, weight):
    path = str(tmp_path / "t.veil")
    veil.table.build(weight, path=path)
    with veil.local_servers(path) as servers:
        client = servers.client(timeout=2)
        assert torch.equal(client.lookup([3]), weight[[3]])
        servers.kill(1)
        with pytest.raises((veil.UnavailableError, veil.DeadlineExceededError)) as error:
            client.lookup([3])
        assert servers.addresses[1] in str(error.value) or "server 1" in str(error.value)


def _running(pid):
    """Whether process `pid` runs (an exited one nobody reaped yet does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_servers_stop_when_the_process_that_started_them_is_killed(tmp_path, weight):
    path = str(tmp_path / "t.veil")
    veil.table.build(weight, path=path)
    work = str(tmp_path / "work")
    script = ("import os, signal, sys, veil\n"
              "servers = veil.local_servers(sys.argv[1], work_dir=sys.argv[2])\n"
              "print(*servers.pids, flush=True)\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    launcher = subprocess.run([sys.executable, "-c", script, path, work], capture_output=True,
                              timeout=120)
    assert launcher.returncode == -signal.SIGKILL, launcher.stderr.decode()
    pids = [int(p) for p in launcher.stdout.split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 30
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    still = [pid for pid in pids if _running(pid)]
    for pid in still:
        os.kill(pid, signal.SIGKILL)
    assert not still, "servers outlived the process that started them"
    for party in (0, 1):
        with open(os.path.join(work, f"server{party}.log")) as log:
            assert "standard input closed" in log.read()


def test_one_client_shared_by_threads(plain_servers, weight):
    client = plain_servers.client()
    wrong = []

    def run(seed):
        rows = [(seed * 7 + i) % ROWS for i in range(5)]
        for _ in range(5):
            if not torch.equal(client.lookup(rows), weight[rows]):
                wrong.append(seed)

    threads = [threading.Thread(target=run, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == [] and client.totals()["lookups"] >= 100


def test_tagged_tables_need_the_row_key(tmp_path):
    """`veil table build` tags every row and writes TABLE.rowkey: the client checks each row's tag
    with it, and refuses the servers without it."""
    rows = tmp_path / "rows.csv"
    rows.write_text("v0,v1\n" + "".join(f"{r},{r + 0.5}\n" for r in range(20)))
    table = tmp_path / "tagged.veil"
    subprocess.run([os.path.join(_build.BIN_DIR, "veil"), "table", "build", f"--csv={rows}",
                    "--format=fp32", f"--out={table}"], check=True, capture_output=True)
    with veil.local_servers(str(table)) as servers:
        with pytest.raises(veil.FailedPreconditionError, match="row key"):
            servers.client()
        client = servers.client(row_key=f"{table}.rowkey")
        assert client.lookup([3, 17]).tolist() == [[3.0, 3.5], [17.0, 17.5]]
        with pytest.raises(veil.NotFoundError):
            servers.client(row_key=str(tmp_path / "none.rowkey"))


@pytest.mark.parametrize("protocol", ["dpf2", "lwe-simple"])
def test_min_epoch_refuses_older_table_versions(tmp_path, weight, protocol):
    """An app that knows version 3 exists refuses servers that serve version 2."""
    path = str(tmp_path / "table.veil")
    veil.table.build(weight, format="fp32", path=path, epoch=2)
    with veil.local_servers(path, protocol=protocol) as servers:
        with pytest.raises(veil.FailedPreconditionError, match=r"\(min_epoch 3\)"):
            servers.client(min_epoch=3)
        client = servers.client(min_epoch=2)
        assert client.table["epoch"] == 2
        assert torch.equal(client.lookup([1, 4]), weight[[1, 4]])


@pytest.mark.parametrize("protocol", ["lwe-exppack-s", "lwe-hybrid"])
def test_an_exppack_server_gives_the_same_rows_without_a_hint(tmp_path, weight, protocol):
    path = str(tmp_path / "table.veil")
    veil.table.build(weight, format="fp32", path=path)
    with veil.local_servers(path, protocol=protocol) as server:
        client = server.client()
        table = client.table
        assert (table["rows"], table["protocol"]) == (ROWS, protocol)
        # No hint; the keys (uploaded once per connection; the hybrid's add its conversion key)
        # and one 32 KiB ciphertext per row.
        keys = 3516676 + (167468 if protocol == "lwe-hybrid" else 0)
        assert table["hint_bytes"] == 0 and table["key_bytes"] == keys
        assert table["answer_bytes"] == 32768
        rows = [3, 0, ROWS - 1]
        assert torch.equal(client.lookup(rows).view(torch.int32), weight[rows].view(torch.int32))
        assert torch.equal(client.lookup_words(rows), weight[rows].view(torch.int32))
        with pytest.raises(veil.Error) as unimplemented:
            client.lookup_pooled([[1, 2]])
        assert unimplemented.value.code == veil.StatusCode.UNIMPLEMENTED
        # Queries made ahead serve the next rows, once each.
        assert client.prepare_queries(2) == 2
        assert torch.equal(client.lookup([7, 8, 9]), weight[[7, 8, 9]])
        assert client.prepare_queries(0) == 0


@pytest.mark.parametrize("protocol", ["lwe-simple", "lwe-double"])
def test_one_lwe_server_gives_the_same_rows(tmp_path, weight, protocol):
    path = str(tmp_path / "table.veil")
    veil.table.build(weight, format="fp32", path=path)
    with veil.local_servers(path, protocol=protocol) as server:
        assert len(server.addresses) == 1
        hints = str(tmp_path / "hints")
        client = server.client(hint_cache=hints)
        table = client.table
        assert (table["rows"], table["dim"], table["protocol"]) == (ROWS, DIM, protocol)
        assert table["hint_bytes"] > 0 and table["log2_failure"] < -40
        rows = [5, 0, ROWS - 1, 5]
        assert torch.equal(client.lookup(rows).view(torch.int32), weight[rows].view(torch.int32))
        assert torch.equal(client.lookup_words(rows), weight[rows].view(torch.int32))
        assert client.last_call()["keys"] == 4
        assert client.stats()["keys"] >= 4
        # Queries made ahead serve the next rows, once each.
        assert client.prepare_queries(3) == 3
        assert torch.equal(client.lookup([9, 2]), weight[[9, 2]])
        assert client.prepare_queries(0) == 1
        # A second client finds the hint in the cache.
        again = veil.Client(server.addresses[0], protocol=protocol, hint_cache=hints)
        assert again.native.hint_from_cache()
        assert torch.equal(again.lookup([7]), weight[[7]])
        # What only dpf2 does, and bad arguments, are clear errors.
        with pytest.raises(veil.Error) as unimplemented:
            client.lookup_pooled([[1, 2]])
        assert unimplemented.value.code == veil.StatusCode.UNIMPLEMENTED
        with pytest.raises(veil.InvalidArgumentError, match="one server"):
            veil.Client(("127.0.0.1:1", "127.0.0.1:2"), protocol=protocol)
        with pytest.raises(veil.InvalidArgumentError, match="outside the table"):
            client.lookup([ROWS])
        with pytest.raises(veil.InvalidArgumentError):
            client.stats(1)
