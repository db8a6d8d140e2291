"""veil.table and veil.Layout: files written from tensors, state dicts, CSV and raw float32;
inspect, verify and read; layouts written, read and arranged."""

import numpy as np
import pytest
import torch

import veil
from conftest import DIM, ROWS


@pytest.mark.parametrize("fmt,tolerance", [("fp32", 0), ("fp16", 1e-3), ("int8", 2e-2),
                                           ("fixed", 1e-4)])
def test_build_then_read_back(tmp_path, fmt, tolerance):
    values = torch.rand(10, 5) * 2 - 1
    path = tmp_path / f"{fmt}.veil"
    digest = veil.table.build(values, format=fmt, path=path, epoch=9)
    info = veil.table.inspect(path, rows=2)
    assert (info["rows"], info["dim"], info["format"], info["epoch"]) == (10, 5, fmt, 9)
    assert info["digest"] == digest and len(digest) == 64
    assert torch.allclose(info["head"], values[:2], atol=tolerance, rtol=0)
    back = veil.table.read(path)
    assert torch.allclose(back, values, atol=tolerance, rtol=0)
    if fmt == "fp32":
        assert torch.equal(back, values)


def test_state_dict_csv_and_raw_sources(tmp_path):
    model = torch.nn.Sequential(torch.nn.Embedding(7, 3), torch.nn.Linear(3, 2))
    with pytest.raises(veil.InvalidArgumentError, match="give key="):
        veil.table.build(model.state_dict(), path=tmp_path / "a.veil")
    veil.table.build(model.state_dict(), key="0.weight", path=tmp_path / "a.veil")
    assert torch.equal(veil.table.read(tmp_path / "a.veil"), model[0].weight.detach())
    only = {"emb.weight": torch.ones(4, 2), "step": torch.tensor(3)}
    veil.table.build(only, path=tmp_path / "b.veil")
    assert veil.table.inspect(tmp_path / "b.veil")["rows"] == 4

    (tmp_path / "rows.csv").write_text("a,b\n1,2\n3.5,-4\n")
    veil.table.build(str(tmp_path / "rows.csv"), path=tmp_path / "c.veil")
    assert veil.table.read(tmp_path / "c.veil").tolist() == [[1, 2], [3.5, -4]]
    np.arange(6, dtype="<f4").tofile(tmp_path / "rows.f32")
    veil.table.build(str(tmp_path / "rows.f32"), path=tmp_path / "d.veil", dim=3)
    assert veil.table.read(tmp_path / "d.veil").shape == (2, 3)


def test_bad_tables_raise(tmp_path):
    with pytest.raises(veil.InvalidArgumentError, match="format"):
        veil.table.build(torch.ones(2, 2), format="bf16", path=tmp_path / "x.veil")
    with pytest.raises(veil.InvalidArgumentError, match="2-D"):
        veil.table.build(torch.ones(4), path=tmp_path / "x.veil")
    with pytest.raises(veil.InvalidArgumentError):
        veil.table.build(torch.tensor([[float("nan")]]), format="int8", path=tmp_path / "x.veil")
    with pytest.raises(veil.NotFoundError) as error:
        veil.table.inspect(tmp_path / "missing.veil")
    assert error.value.code == veil.StatusCode.NOT_FOUND
    with pytest.raises(veil.InvalidArgumentError, match="needs dim"):
        veil.table.build(str(tmp_path / "rows.f32"), path=tmp_path / "x.veil")

    path = tmp_path / "t.veil"
    veil.table.build(torch.ones(3, 4), path=path)
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(veil.InvalidArgumentError, match="digest mismatch"):
        veil.table.verify(path)


def test_layout_files_and_physical_table(tmp_path, tight_layout, weight):
    path = str(tmp_path / "layout.bin")
    tight_layout.write(path)
    again = veil.Layout.read(path)
    assert again.to_bytes() == tight_layout.to_bytes()
    assert veil.Layout.from_bytes(again.to_bytes()).num_rows == ROWS
    assert (again.row_words, again.colocation, again.entry_words) == (DIM, 1, 2 * DIM)
    assert len(again.hot_rows) == 6 and again.cold == {"bins": 4, "rounds": 1}
    assert "keys=" in repr(again)
    table = str(tmp_path / "physical.veil")
    veil.table.build(weight, layout=again, path=table)
    info = veil.table.inspect(table)
    assert (info["rows"], info["dim"]) == (again.physical_rows, again.entry_words)
    with pytest.raises(veil.InvalidArgumentError):
        veil.table.build(weight[:10], layout=again, path=table)
    with pytest.raises(veil.NotFoundError):
        veil.Layout.read(str(tmp_path / "nothing"))
    with pytest.raises(veil.InvalidArgumentError):
        veil.Layout.from_bytes(b"VEILLAYT" + bytes(40))
